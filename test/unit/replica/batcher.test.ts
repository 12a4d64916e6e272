import type { BatchPolicyOptions } from '../../../replica/onnx/batch-policy.js';
import { Batcher } from '../../../replica/onnx/batcher.js';
import { parseInferBody } from '../../../common/inference-body.js';
import type { ModelSession } from '../../../replica/onnx/model-session.js';
import type { HostTensor, ModelSignature } from '../../../common/tensor.js';

const sig: ModelSignature = { inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 2] }], outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 1] }] };

/** y = x0 + x1 + offset, recording the row counts of every run. */
function fakeSession(offset: number, runs: number[], batching: BatchPolicyOptions | undefined = { maxBatchSize: 4, batchWaitMs: 50 }): ModelSession {
  return {
    signature: sig,
    batchable: true,
    batching,
    run: (inputs: readonly HostTensor[]) => {
      const x = inputs[0]!;
      const n = x.dims[0]!;
      runs.push(n);
      const y = Float32Array.from({ length: n }, (_, i) => Number(x.data[2 * i]) + Number(x.data[2 * i + 1]) + offset);
      return Promise.resolve([{ name: 'y', datatype: 'FP32', dims: [n, 1], data: y }]);
    },
    release: () => Promise.resolve(),
  };
}

const clock = { now: () => Date.now() };

describe('batcher', () => {
  it('stacks one model’s requests into one run and gives each request its own rows', async () => {
    const sizes: number[] = [];
    const runsA: number[] = [];
    const runsB: number[] = [];
    const b = new Batcher(clock, (n) => sizes.push(n));
    const a = fakeSession(100, runsA, { maxBatchSize: 3, batchWaitMs: 50 });
    const bb = fakeSession(200, runsB, { maxBatchSize: 3, batchWaitMs: 50 });
    const req = (rows: number[][]) => parseInferBody(rows, sig);
    const results = await Promise.all([
      b.run('a', a, req([[1, 1]])),
      b.run('b', bb, req([[5, 5]])),
      b.run(
        'a',
        a,
        req([
          [2, 2],
          [3, 3],
        ]),
      ),
      b.run('a', a, req([[4, 4]])),
    ]);
    expect(results.map((r) => Array.from(r[0]!.data as Float32Array))).toEqual([[102], [210], [104, 106], [108]]);
    expect(runsA).toEqual([4]); // three requests, four rows, one run
    expect(runsB).toEqual([1]); // model b alone after the wait, never with a's requests
    expect(sizes.sort()).toEqual([1, 3]);
  });

  it('never runs requests holding two versions of one model in one batch', async () => {
    const runsOld: number[] = [];
    const runsNew: number[] = [];
    const b = new Batcher(clock, () => undefined);
    const before = fakeSession(100, runsOld, { maxBatchSize: 4, batchWaitMs: 20 });
    const after = fakeSession(200, runsNew, { maxBatchSize: 4, batchWaitMs: 20 });
    const req = (rows: number[][]) => parseInferBody(rows, sig);
    const results = await Promise.all([b.run('m', before, req([[1, 1]])), b.run('m', after, req([[2, 2]])), b.run('m', before, req([[3, 3]]))]);
    expect(results.map((r) => Array.from(r[0]!.data as Float32Array))).toEqual([[102], [204], [106]]);
    expect({ old: runsOld, new: runsNew }).toEqual({ old: [2], new: [1] });
  });

  it('runs each request alone at once when the model does not say its rows are independent', async () => {
    const runs: number[] = [];
    const b = new Batcher(clock, () => undefined);
    const alone: ModelSession = { ...fakeSession(0, runs), batching: undefined };
    const outs = await Promise.all([b.run('a', alone, parseInferBody([[1, 2]], sig)), b.run('a', alone, parseInferBody([[3, 4]], sig))]);
    expect(outs.map((o) => Array.from(o[0]!.data as Float32Array))).toEqual([[3], [7]]);
    expect(runs).toEqual([1, 1]);
  });

  it('rejects every request of a batch whose run fails', async () => {
    const b = new Batcher(clock, () => undefined);
    const broken: ModelSession = { ...fakeSession(0, [], { maxBatchSize: 2, batchWaitMs: 1000 }), run: async () => Promise.reject(new Error('boom')) };
    const results = await Promise.allSettled([b.run('a', broken, parseInferBody([[1, 2]], sig)), b.run('a', broken, parseInferBody([[3, 4]], sig))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });
});
