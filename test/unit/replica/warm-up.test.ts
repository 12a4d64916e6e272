import { expect } from '@jest/globals';
import type { HostTensor } from '../../../common/tensor.js';
import type { ModelSession } from '../../../replica/onnx/model-session.js';
import { warmUp, zeroInputs } from '../../../replica/onnx/warm-up.js';

function recording(fail?: string): { model: ModelSession; runs: HostTensor[][] } {
  const runs: HostTensor[][] = [];
  const model: ModelSession = {
    signature: { inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }], outputs: [{ name: 'y', datatype: 'FP32', shape: [-1] }] },
    batchable: true,
    run: (inputs) => {
      runs.push([...inputs]);
      return fail ? Promise.reject(new Error(fail)) : Promise.resolve([]);
    },
    release: () => Promise.resolve(),
  };
  return { model, runs };
}

describe('warm-up', () => {
  it('builds zeros of every input shape, dynamic dims 1, empty strings for BYTES', () => {
    const [x, ids, text] = zeroInputs([
      { name: 'x', datatype: 'FP32', shape: [-1, 3, 2] },
      { name: 'ids', datatype: 'INT64', shape: [4] },
      { name: 'text', datatype: 'BYTES', shape: [-1] },
    ]);
    expect(x).toEqual({ datatype: 'FP32', dims: [1, 3, 2], data: new Float32Array(6) });
    expect(ids).toEqual({ datatype: 'INT64', dims: [4], data: new BigInt64Array(4) });
    expect(text).toEqual({ datatype: 'BYTES', dims: [1], data: [''] });
  });

  it("runs the model once on zeros, or on its config.json's input", async () => {
    const { model, runs } = recording();
    await warmUp(model, undefined);
    await warmUp(model, { inputs: [{ name: 'x', shape: [2, 3], datatype: 'FP32', data: [1, 2, 3, 4, 5, 6] }] });
    expect(runs.map((r) => r.map((t) => t.dims))).toEqual([[[1, 3]], [[2, 3]]]);
  });

  it('fails the load, saying why, when the input does not fit or the run fails', async () => {
    await expect(warmUp(recording().model, { inputs: [{ name: 'z', shape: [1], datatype: 'FP32', data: [0] }] })).rejects.toMatchObject({
      code: 'model_load_failed',
      message: expect.stringMatching(/warm-up input of config\.json does not fit/),
    });
    await expect(warmUp(recording('CUDA failure 2: out of memory').model, undefined)).rejects.toMatchObject({
      code: 'model_load_failed',
      message: 'the warm-up run failed: CUDA failure 2: out of memory',
    });
  });
});
