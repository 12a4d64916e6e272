import { encodeOnnxModel, type OnnxNode } from '../../../common/onnx-writer.js';
import { ProtoWriter, protoFields } from '../../../common/proto-wire.js';
import { wineModelBytes } from '../../../common/wine-model.js';
import { splitWeights, type SplitModel } from '../../../replica/onnx/shared-graph.js';
import { singleRowGraph } from '../../../replica/onnx/single-row-graph.js';

function split(model: Uint8Array): SplitModel {
  const s = splitWeights(model);
  if (!s) throw new Error('not a shared-graph model');
  return s;
}

/** x[batch,2] → Gemm(x, w1[2,3]) → nodes after `h`, with the weights named in `weights`. */
function modelWith(nodes: OnnxNode[], weights: Record<string, number[]>, outputs = ['y']): Uint8Array {
  const data = (dims: number[]) => Float32Array.from({ length: dims.reduce((n, d) => n * d, 1) }, (_, i) => i / 10);
  return encodeOnnxModel({
    name: 'm',
    opset: 13,
    inputs: [{ name: 'x', shape: ['batch', 2] }],
    outputs: outputs.map((name) => ({ name, shape: ['batch', 1] })),
    initializers: [{ name: 'w1', dims: [2, 3], data: data([2, 3]) }, ...Object.entries(weights).map(([name, dims]) => ({ name, dims, data: data(dims) }))],
    nodes: [{ opType: 'Gemm', inputs: ['x', 'w1'], outputs: ['h'] }, ...nodes],
  });
}

describe('singleRowGraph', () => {
  it("turns the wine model's one-column head into a transposed Gemm (its weight fed as [1,K]: onnxruntime checks that below)", () => {
    const variant = singleRowGraph(split(wineModelBytes('m1', 1000)));
    expect(variant?.transposed).toEqual(new Map([['w2', 1000]]));
    const graphField = [...protoFields(variant!.graph)].find((f) => f.field === 7);
    const text = Buffer.from(variant!.graph.subarray(graphField!.valueStart, graphField!.valueEnd)).toString('latin1');
    expect(text).toContain('transB');
  });

  it('leaves graphs alone where no one-column weight is only ever B of an untransposed Gemm', () => {
    const head = (extra: Partial<OnnxNode> = {}): OnnxNode => ({ opType: 'Gemm', inputs: ['h', 'w2'], outputs: ['y'], ...extra });
    // Two columns: the kernel is not the slow one, and the bytes are not their own transpose.
    expect(singleRowGraph(split(modelWith([head()], { w2: [3, 2] })))).toBeUndefined();
    // Already transposed by its Gemm.
    expect(singleRowGraph(split(modelWith([head({ intAttributes: { transB: 1 } })], { w2: [3, 1] })))).toBeUndefined();
    // Also used by another node, which expects [K,1].
    const alsoAdded: OnnxNode = { opType: 'Add', inputs: ['w2', 'w2'], outputs: ['z'] };
    expect(singleRowGraph(split(modelWith([head(), alsoAdded], { w2: [3, 1] }, ['y', 'z'])))).toBeUndefined();
    // A of a Gemm, not B.
    expect(singleRowGraph(split(modelWith([{ opType: 'Gemm', inputs: ['w2', 'h'], outputs: ['y'], intAttributes: { transA: 1 } }], { w2: [3, 1] })))).toBeUndefined();
    // Not a model.
    expect(singleRowGraph({ graph: new TextEncoder().encode('not an onnx model'), key: 'k', weights: [{ name: 'w', dims: [3, 1], start: 0, end: 12 }] })).toBeUndefined();
  });

  it('transposes only the weights that qualify', () => {
    const nodes: OnnxNode[] = [
      { opType: 'Gemm', inputs: ['h', 'w2'], outputs: ['y'] },
      { opType: 'Gemm', inputs: ['h', 'w3'], outputs: ['z'] },
      { opType: 'Relu', inputs: ['w3'], outputs: ['r'] },
    ];
    expect(singleRowGraph(split(modelWith(nodes, { w2: [3, 1], w3: [3, 1] }, ['y', 'z', 'r'])))?.transposed).toEqual(new Map([['w2', 3]]));
  });

  it('leaves a graph with a subgraph alone: names inside it are not followed', () => {
    const model = split(wineModelBytes('m1', 100));
    // The same graph plus a node holding a subgraph (AttributeProto field 6) that could use w2.
    const withSubgraph = new ProtoWriter();
    for (const f of protoFields(model.graph)) {
      if (f.field !== 7) withSubgraph.raw(model.graph.subarray(f.start, f.end));
      else
        withSubgraph.message(7, (g) => {
          g.raw(model.graph.subarray(f.valueStart, f.valueEnd));
          g.message(1, (n) =>
            n
              .string(1, 'cond')
              .string(2, 'out')
              .string(4, 'If')
              .message(5, (a) =>
                a
                  .string(1, 'then_branch')
                  .message(6, (sub) => sub.string(2, 'then'))
                  .int(20, 5),
              ),
          );
        });
    }
    expect(singleRowGraph({ ...model, graph: withSubgraph.finish() })).toBeUndefined();
  });
});
