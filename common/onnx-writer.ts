/**
 * Just enough of protobuf and onnx.proto to write a ModelProto: the example models are made
 * here rather than downloaded, and this avoids a protobuf runtime for a few dozen bytes of
 * framing around the weights.
 */

class ProtoWriter {
  private readonly parts: Uint8Array[] = [];

  private varint(value: number | bigint): void {
    let v = BigInt.asUintN(64, BigInt(value));
    const bytes: number[] = [];
    do {
      let b = Number(v & 0x7fn);
      v >>= 7n;
      if (v !== 0n) b |= 0x80;
      bytes.push(b);
    } while (v !== 0n);
    this.parts.push(Uint8Array.from(bytes));
  }

  private tag(field: number, wire: 0 | 2): void {
    this.varint((field << 3) | wire);
  }

  int(field: number, value: number): this {
    this.tag(field, 0);
    this.varint(value);
    return this;
  }

  bytes(field: number, value: Uint8Array): this {
    this.tag(field, 2);
    this.varint(value.length);
    this.parts.push(value);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, build: (w: ProtoWriter) => void): this {
    const inner = new ProtoWriter();
    build(inner);
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    const total = this.parts.reduce((n, p) => n + p.length, 0);
    const out = new Uint8Array(total);
    let off = 0;
    for (const p of this.parts) {
      out.set(p, off);
      off += p.length;
    }
    return out;
  }
}

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

function valueInfo(w: ProtoWriter, v: OnnxValueInfo): void {
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
      for (const v of g.inputs) graph.message(11, (w) => valueInfo(w, v));
      for (const v of g.outputs) graph.message(12, (w) => valueInfo(w, v));
    })
    .message(8, (opset) => opset.string(1, '').int(2, g.opset))
    .finish();
}
