import { encodeOnnxModel, ONNX_FLOAT } from '../../../common/onnx-writer.js';
import { ProtoWriter, protoFields } from '../../../common/proto-wire.js';
import { wineModelBytes, wineWeights } from '../../../common/wine-model.js';
import { splitWeights } from '../../../replica/onnx/shared-graph.js';

const floatsAt = (bytes: Uint8Array, start: number, end: number): Float32Array => new Float32Array(bytes.slice(start, end).buffer);

/** y = x · w + c, with `c` an int64-free float bias and an int64 shape constant beside it. */
function modelWith(extra: (graph: ProtoWriter) => void, labels = 'a'): Uint8Array {
  return new ProtoWriter()
    .int(1, 8)
    .string(2, `producer-${labels}`)
    .string(6, `doc-${labels}`)
    .message(7, (g) => {
      g.message(1, (n) => n.string(1, 'x').string(1, 'w').string(2, 'y').string(4, 'MatMul'));
      g.string(2, `graph-${labels}`);
      extra(g);
    })
    .message(8, (o) => o.string(1, '').int(2, 13))
    .finish();
}

const floatInitializer = (name: string, dims: number[], data: Float32Array) => (g: ProtoWriter) =>
  g.message(5, (t) => {
    for (const d of dims) t.int(1, d);
    t.int(2, ONNX_FLOAT)
      .string(8, name)
      .bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  });

describe('splitWeights', () => {
  it('moves every float initializer out of a wine model, leaving a small graph that locates each weight in the file', () => {
    const bytes = wineModelBytes('m1', 1000);
    const split = splitWeights(bytes);
    expect(split).toBeDefined();
    const w = wineWeights('m1', 1000);
    expect(split?.weights.map((x) => [x.name, x.dims])).toEqual([
      ['w1', [11, 1000]],
      ['b1', [1000]],
      ['w2', [1000, 1]],
      ['b2', [1]],
    ]);
    const [w1, b1, w2, b2] = split?.weights ?? [];
    expect(floatsAt(bytes, w1!.start, w1!.end)).toEqual(w.w1);
    expect(floatsAt(bytes, b1!.start, b1!.end)).toEqual(w.b1);
    expect(floatsAt(bytes, w2!.start, w2!.end)).toEqual(w.w2);
    expect(floatsAt(bytes, b2!.start, b2!.end)).toEqual(w.b2);
    expect(split!.graph.length).toBeLessThan(1000);
  });

  it('gives models of one shape the same key, whatever their weights and names, and other shapes other keys', () => {
    const a = splitWeights(wineModelBytes('model-a', 500));
    const b = splitWeights(wineModelBytes('b', 500)); // graph name "wine-b" differs in length too
    const wider = splitWeights(wineModelBytes('model-a', 501));
    expect(a?.key).toBe(b?.key);
    expect(a?.graph).toEqual(b?.graph);
    expect(wider?.key).not.toBe(a?.key);
    const labelled = (labels: string) => splitWeights(modelWith(floatInitializer('w', [2, 2], Float32Array.of(1, 2, 3, 4)), labels));
    expect(labelled('a')?.key).toBe(labelled('other producer and doc')?.key);
  });

  it('keeps non-float initializers in the graph, so their values are part of the key', () => {
    const withShape = (shape: bigint) =>
      modelWith((g) => {
        floatInitializer('w', [2, 2], Float32Array.of(1, 2, 3, 4))(g);
        g.message(5, (t) =>
          t
            .int(1, 1)
            .int(2, 7 /* INT64 */)
            .string(8, 'shape')
            .bytes(9, new Uint8Array(BigInt64Array.of(shape).buffer)),
        );
      });
    const two = splitWeights(withShape(2n));
    expect(two?.weights.map((w) => w.name)).toEqual(['w']);
    expect(splitWeights(withShape(3n))?.key).not.toBe(two?.key);
  });

  it('does not list a weight twice when an old (IR < 4) model already declares it as an input', () => {
    const model = modelWith((g) => {
      floatInitializer('w', [2, 2], Float32Array.of(1, 2, 3, 4))(g);
      g.message(11, (v) => v.string(1, 'w'));
      g.message(11, (v) => v.string(1, 'x'));
    });
    const model2 = splitWeights(model)?.graph ?? new Uint8Array();
    const graph = [...protoFields(model2)].find((f) => f.field === 7);
    const inputs = [...protoFields(model2, graph?.valueStart, graph?.valueEnd)].filter((f) => f.field === 11);
    const names = inputs.map((i) => Buffer.from(model2.subarray(i.valueStart, i.valueEnd)).toString('latin1').slice(2));
    expect(names).toEqual(['w', 'x']);
  });

  it('answers undefined when there is nothing to share or the bytes are not a model', () => {
    const noWeights = encodeOnnxModel({
      name: 'relu',
      opset: 13,
      inputs: [{ name: 'x', shape: [1] }],
      outputs: [{ name: 'y', shape: [1] }],
      initializers: [],
      nodes: [{ opType: 'Relu', inputs: ['x'], outputs: ['y'] }],
    });
    expect(splitWeights(noWeights)).toBeUndefined();
    expect(splitWeights(new TextEncoder().encode('this is not an onnx model at all'))).toBeUndefined();
    const wine = wineModelBytes('t', 100);
    expect(splitWeights(wine.subarray(0, wine.length - 7))).toBeUndefined(); // truncated
    // A weight whose raw bytes do not match its dims is left to onnxruntime to refuse.
    expect(splitWeights(modelWith(floatInitializer('w', [2, 3], Float32Array.of(1, 2, 3, 4))))).toBeUndefined();
  });
});
