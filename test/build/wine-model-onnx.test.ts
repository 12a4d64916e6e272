import { SAMPLE_WINE, wineForward, wineWeights } from '../../common/wine-model.js';
import { runNodeScript } from '../helpers/node-script.js';

// The build tier: the model is built by dist/common/wine-model.js in a Node process of its own (runNodeScript).
describe('the example wine models', () => {
  it('compute in onnxruntime what the reference forward pass computes', async () => {
    const rows = [SAMPLE_WINE, SAMPLE_WINE.map((x) => x * 0.9)];
    const got = await runNodeScript<number[]>(`
      import ort from 'onnxruntime-node';
      import { wineModelBytes } from './dist/common/wine-model.js';
      const session = await ort.InferenceSession.create(wineModelBytes('red-1'));
      const out = await session.run({ features: new ort.Tensor('float32', Float32Array.from(${JSON.stringify(rows.flat())}), [2, 11]) });
      console.log(JSON.stringify(Array.from(out.quality.data)));
    `);
    const expected = wineForward(wineWeights('red-1'), rows);
    expect(got).toHaveLength(2);
    got.forEach((v, i) => expect(v).toBeCloseTo(expected[i] ?? NaN, 4));
  });
});
