import { encodeOnnxModel, writeValueInfo, type OnnxElemType, type OnnxNode } from '../../../common/onnx-writer.js';
import { protoFields, ProtoWriter, WIRE_LEN } from '../../../common/proto-wire.js';
import { narrowToBf16, widenBf16, widenBf16Edges } from '../../../replica/onnx/bf16-edges.js';

const utf8 = new TextDecoder();

/** `x` [batch,3] through `nodes` to the outputs, with the types given. */
function model(nodes: OnnxNode[], input: OnnxElemType, outputs: Record<string, OnnxElemType>): Uint8Array {
  return encodeOnnxModel({
    name: 'm',
    opset: 17,
    nodes,
    initializers: [],
    inputs: [{ name: 'x', shape: ['batch', 3], elemType: input }],
    outputs: Object.entries(outputs).map(([name, elemType]) => ({ name, shape: ['batch', 3], elemType })),
  });
}

/** A graph read back: its nodes as "op(inputs)->outputs to=…" and its edges as name:elem_type:shape. */
function readGraph(bytes: Uint8Array): { nodes: string[]; inputs: string[]; outputs: string[] } {
  const graph = [...protoFields(bytes)].find((f) => f.field === 7)!;
  const read = { nodes: [] as string[], inputs: [] as string[], outputs: [] as string[] };
  const strings = (from: number, to: number, field: number): string[] =>
    [...protoFields(bytes, from, to)].filter((f) => f.field === field && f.wire === WIRE_LEN).map((f) => utf8.decode(bytes.subarray(f.valueStart, f.valueEnd)));
  const sub = (from: number, to: number, field: number): [number, number] => {
    const f = [...protoFields(bytes, from, to)].find((g) => g.field === field)!;
    return [f.valueStart, f.valueEnd];
  };
  for (const f of protoFields(bytes, graph.valueStart, graph.valueEnd)) {
    if (f.field === 1) {
      const to = [...protoFields(bytes, f.valueStart, f.valueEnd)].filter((a) => a.field === 5).map((a) => [...protoFields(bytes, a.valueStart, a.valueEnd)].find((v) => v.field === 3)?.int);
      read.nodes.push(
        `${strings(f.valueStart, f.valueEnd, 4)[0]}(${strings(f.valueStart, f.valueEnd, 1).join(',')})->${strings(f.valueStart, f.valueEnd, 2).join(',')}${to.length ? ` to=${to.join(',')}` : ''}`,
      );
    } else if (f.field === 11 || f.field === 12) {
      const [ts, te] = sub(...sub(f.valueStart, f.valueEnd, 2), 1);
      const elem = [...protoFields(bytes, ts, te)].find((e) => e.field === 1)!.int;
      const dims = [...protoFields(bytes, ...sub(ts, te, 2))].map(
        (d) => [...protoFields(bytes, d.valueStart, d.valueEnd)].map((v) => (v.wire === WIRE_LEN ? utf8.decode(bytes.subarray(v.valueStart, v.valueEnd)) : v.int))[0],
      );
      (f.field === 11 ? read.inputs : read.outputs).push(`${strings(f.valueStart, f.valueEnd, 1)[0]}:${elem}:${dims.join(',')}`);
    }
  }
  return read;
}

describe('widenBf16Edges', () => {
  it('leaves a model without bfloat16 edges alone', () => {
    expect(
      widenBf16Edges(
        model(
          [
            { opType: 'Cast', inputs: ['x'], outputs: ['y'], intAttributes: { to: 16 } },
            { opType: 'Cast', inputs: ['y'], outputs: ['z'], intAttributes: { to: 1 } },
          ],
          'float32',
          { z: 'float32' },
        ),
      ),
    ).toBeUndefined();
  });

  it('widens a bfloat16 input and output to float32 with Casts, keeping names and shapes', () => {
    const edges = widenBf16Edges(model([{ opType: 'Identity', inputs: ['x'], outputs: ['y'] }], 'bfloat16', { y: 'bfloat16' }))!;
    expect([...edges.inputs]).toEqual(['x']);
    expect([...edges.outputs]).toEqual(['y']);
    expect(readGraph(edges.model)).toEqual({
      nodes: ['Cast(x)->x__bf16 to=16', 'Identity(x__bf16)->y__bf16', 'Cast(y__bf16)->y to=1'],
      inputs: ['x:1:batch,3'],
      outputs: ['y:1:batch,3'],
    });
  });

  it('renames every use of an edge, leaves other outputs alone and avoids names the graph has', () => {
    const edges = widenBf16Edges(
      model(
        [
          { opType: 'Identity', inputs: ['x'], outputs: ['x__bf16'] },
          { opType: 'Identity', inputs: ['x'], outputs: ['y'] },
          { opType: 'Cast', inputs: ['y'], outputs: ['f'], intAttributes: { to: 1 } },
        ],
        'bfloat16',
        { y: 'bfloat16', f: 'float32', x__bf16: 'bfloat16' },
      ),
    )!;
    expect([...edges.outputs]).toEqual(['y', 'x__bf16']);
    expect(readGraph(edges.model)).toEqual({
      nodes: ['Cast(x)->x__bf16_ to=16', 'Identity(x__bf16_)->x__bf16__bf16', 'Identity(x__bf16_)->y__bf16', 'Cast(y__bf16)->f to=1', 'Cast(y__bf16)->y to=1', 'Cast(x__bf16__bf16)->x__bf16 to=1'],
      inputs: ['x:1:batch,3'],
      outputs: ['y:1:batch,3', 'f:1:batch,3', 'x__bf16:1:batch,3'],
    });
  });

  it('refuses, saying why, an output no node computes', () => {
    const passThrough = encodeOnnxModel({
      name: 'p',
      opset: 17,
      nodes: [],
      initializers: [],
      inputs: [{ name: 'x', shape: [3], elemType: 'bfloat16' }],
      outputs: [{ name: 'x', shape: [3], elemType: 'bfloat16' }],
    });
    expect(() => widenBf16Edges(passThrough)).toThrow(/output "x" is not computed by a node of the graph/);
  });

  it('refuses, saying why, a graph with subgraphs', () => {
    const edge = { name: 'x', shape: [3], elemType: 'bfloat16' as const };
    const withIf = new ProtoWriter()
      .int(1, 8)
      .message(7, (g) =>
        g
          .message(1, (n) =>
            n
              .string(1, 'c')
              .string(2, 'y')
              .string(4, 'If')
              .message(5, (a) =>
                a
                  .string(1, 'then_branch')
                  .message(6, (b) => b.string(2, 'then'))
                  .int(20, 5),
              ),
          )
          .message(11, (v) => writeValueInfo(v, edge))
          .message(12, (v) => writeValueInfo(v, { ...edge, name: 'y' })),
      )
      .finish();
    expect(() => widenBf16Edges(withIf)).toThrow(/the graph holds subgraphs/);
  });

  it('answers undefined for bytes that are not a model', () => {
    expect(widenBf16Edges(Uint8Array.from([0x3a, 0x05, 0x01]))).toBeUndefined();
  });
});

describe('widenBf16 and narrowToBf16', () => {
  it('widen every bfloat16 exactly and narrow it back to the same bits (NaNs made quiet)', () => {
    const all = Uint16Array.from({ length: 0x10000 }, (_, i) => i);
    const wide = widenBf16(all);
    const words = new Uint32Array(wide.buffer);
    expect(words.every((w, i) => w === i * 0x10000)).toBe(true);
    const back = narrowToBf16(wide);
    const isNaN = (b: number): boolean => (b & 0x7fff) > 0x7f80;
    expect(back.every((b, i) => b === (isNaN(i) ? i | 0x40 : i))).toBe(true);
  });

  it('round other float32 values to the nearest bfloat16, ties to even', () => {
    const words = Uint32Array.from([0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0x7f7fffff, 0xff7f8000, 0x00008000]);
    expect([...narrowToBf16(new Float32Array(words.buffer))]).toEqual([0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x7f80, 0xff80, 0x0000]);
  });
});
