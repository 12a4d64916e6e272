import { ProtoWriter } from './proto-wire.js';

/**
 * Just enough of onnx.proto to write a ModelProto: the example models are made here rather than
 * downloaded, and this avoids a protobuf runtime for a few dozen bytes of framing around the
 * weights.
 */

/** onnx.TensorProto.DataType */
export const ONNX_FLOAT = 1;

export interface OnnxTensor {
  name: string;
  dims: number[];
  data: Float32Array;
}

export interface OnnxValueInfo {
  name: string;
  /** A string is a symbolic (dynamic) dimension such as the batch size. */
  shape: (number | string)[];
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

/** A float tensor's ValueInfoProto: its name and shape. */
export function writeValueInfo(w: ProtoWriter, v: OnnxValueInfo): void {
  w.string(1, v.name).message(2, (type) =>
    type.message(1, (tensor) =>
      tensor.int(1, ONNX_FLOAT).message(2, (shape) => {
        for (const d of v.shape) shape.message(1, (dim) => (typeof d === 'number' ? dim.int(1, d) : dim.string(2, d)));
      }),
    ),
  );
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
          tensor.bytes(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
        });
      }
      for (const v of g.inputs) graph.message(11, (w) => writeValueInfo(w, v));
      for (const v of g.outputs) graph.message(12, (w) => writeValueInfo(w, v));
    })
    .message(8, (opset) => opset.string(1, '').int(2, g.opset))
    .finish();
}
