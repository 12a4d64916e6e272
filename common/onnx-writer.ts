import { ProtoWriter } from './proto-wire.js';

/**
 * Just enough of onnx.proto to write a ModelProto: the example models are made here rather than
 * downloaded, and this avoids a protobuf runtime for a few dozen bytes of framing around the
 * weights.
 */

/** onnx.TensorProto.DataType */
export const ONNX_FLOAT = 1;

/** onnx.TensorProto.DataType of each element type a graph's inputs and outputs may have. */
export const ONNX_ELEM_TYPE = {
  float32: 1,
  uint8: 2,
  int8: 3,
  uint16: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  string: 8,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
  uint64: 13,
  bfloat16: 16,
} as const;
export type OnnxElemType = keyof typeof ONNX_ELEM_TYPE;

export interface OnnxTensor {
  name: string;
  dims: number[];
  data: Float32Array;
  /**
   * Where the weights are stored instead of inside the model: a file beside it (ONNX external
   * data). `data` is then written to that file by the caller, at `offset`.
   */
  external?: { location: string; offset: number };
}

export interface OnnxValueInfo {
  name: string;
  /** A string is a symbolic (dynamic) dimension such as the batch size. */
  shape: (number | string)[];
  /** float32 when not given. */
  elemType?: OnnxElemType;
  /** A sequence of such tensors rather than one (as SequenceConstruct makes). */
  sequence?: boolean;
}

export interface OnnxNode {
  opType: string;
  inputs: string[];
  outputs: string[];
  intAttributes?: Record<string, number>;
}

export interface OnnxGraph {
  name: string;
  nodes: OnnxNode[];
  initializers: OnnxTensor[];
  inputs: OnnxValueInfo[];
  outputs: OnnxValueInfo[];
  opset: number;
}

/** A tensor's ValueInfoProto: its name, element type and shape. */
export function writeValueInfo(w: ProtoWriter, v: OnnxValueInfo): void {
  const tensorType = (type: ProtoWriter): ProtoWriter =>
    type.message(1, (tensor) =>
      tensor.int(1, ONNX_ELEM_TYPE[v.elemType ?? 'float32']).message(2, (shape) => {
        for (const d of v.shape) shape.message(1, (dim) => (typeof d === 'number' ? dim.int(1, d) : dim.string(2, d)));
      }),
    );
  // TypeProto: tensor_type = 1, sequence_type = 4 (whose elem_type = 1 is a TypeProto)
  w.string(1, v.name).message(2, (type) => (v.sequence ? type.message(4, (seq) => seq.message(1, tensorType)) : tensorType(type)));
}

export function encodeOnnxModel(g: OnnxGraph): Uint8Array {
  return new ProtoWriter()
    .int(1, 8) // ir_version 8: understood by every onnxruntime since 1.10
    .string(2, 'modelmux')
    .message(7, (graph) => {
      g.nodes.forEach((n, i) =>
        graph.message(1, (node) => {
          for (const input of n.inputs) node.string(1, input);
          for (const output of n.outputs) node.string(2, output);
          node.string(3, `${n.opType.toLowerCase()}_${i}`).string(4, n.opType);
          for (const [name, value] of Object.entries(n.intAttributes ?? {})) {
            node.message(5, (a) => a.string(1, name).int(3, value).int(20, 2));
          }
        }),
      );
      graph.string(2, g.name);
      for (const t of g.initializers) {
        graph.message(5, (tensor) => {
          for (const d of t.dims) tensor.int(1, d);
          tensor.int(2, ONNX_FLOAT).string(8, t.name);
          if (t.external) {
            // external_data entries (StringStringEntryProto) and data_location = EXTERNAL
            const entries: [string, string][] = [
              ['location', t.external.location],
              ['offset', String(t.external.offset)],
              ['length', String(t.data.byteLength)],
            ];
            for (const [key, value] of entries) tensor.message(13, (e) => e.string(1, key).string(2, value));
            tensor.int(14, 1);
          } else tensor.bytes(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
        });
      }
      for (const v of g.inputs) graph.message(11, (w) => writeValueInfo(w, v));
      for (const v of g.outputs) graph.message(12, (w) => writeValueInfo(w, v));
    })
    .message(8, (opset) => opset.string(1, '').int(2, g.opset))
    .finish();
}
