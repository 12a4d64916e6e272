import { encodeOnnxModel } from '../../../common/onnx-writer.js';
import { SAMPLE_WINE, wineModelBytes } from '../../../common/wine-model.js';
import { alignWeights, WEIGHT_ALIGNMENT, weightsAligned } from '../../../replica/onnx/aligned-weights.js';
import { splitWeights } from '../../../replica/onnx/shared-graph.js';
import { runNodeScript } from '../../helpers/node-script.js';

/** Each weight's bytes, by name: what a rewrite must keep exactly. */
function weightBytes(model: Uint8Array): Record<string, number[]> {
  const split = splitWeights(model);
  if (!split) throw new Error('not a shared-graph model');
  return Object.fromEntries(split.weights.map((w) => [w.name, [...model.subarray(w.start, w.end)]]));
}

/** The first output of `model` on the sample wine, from onnxruntime in a Node process of its own (runNodeScript). */
function predict(model: Uint8Array): Promise<number[]> {
  return runNodeScript<number[]>(`
    import ort from 'onnxruntime-node';
    const session = await ort.InferenceSession.create(Buffer.from(${JSON.stringify(Buffer.from(model).toString('base64'))}, 'base64'));
    const out = await session.run({ features: new ort.Tensor('float32', Float32Array.from(${JSON.stringify(SAMPLE_WINE)}), [1, ${SAMPLE_WINE.length}]) });
    console.log(JSON.stringify(Array.from(Object.values(out)[0].data)));
  `);
}

describe('alignWeights', () => {
  it('puts every weight of a wine model on a 64-byte boundary and leaves the same model', async () => {
    const model = wineModelBytes('m1', 1000);
    expect(weightsAligned(model, WEIGHT_ALIGNMENT)).toBe(false);
    const aligned = alignWeights(model);
    expect(aligned).toBeDefined();
    const out = aligned as Uint8Array;
    expect(weightsAligned(out, WEIGHT_ALIGNMENT)).toBe(true);
    expect(weightBytes(out)).toEqual(weightBytes(model));
    // The same graph to the shared sessions, and the same answers from a session of its own.
    expect(splitWeights(out)?.key).toBe(splitWeights(model)?.key);
    expect(await predict(out)).toEqual(await predict(model));
    // Done once: an aligned file is left alone.
    expect(alignWeights(out)).toBeUndefined();
  });

  it('aligns models of every size, whatever the length prefixes in front of the weights take', () => {
    // Hidden sizes whose graphs and tensors cross the 1-, 2- and 3-byte lengths of their prefixes.
    for (const hidden of [1, 2, 3, 5, 8, 13, 29, 31, 32, 33, 300, 371, 372, 373, 1490, 1491, 1492, 4000]) {
      const model = wineModelBytes(`h${hidden}`, hidden);
      const out = alignWeights(model) ?? model;
      expect({ hidden, aligned: weightsAligned(out, WEIGHT_ALIGNMENT) }).toEqual({ hidden, aligned: true });
      expect(weightBytes(out)).toEqual(weightBytes(model));
      expect(out.length - model.length).toBeLessThan(4 * (WEIGHT_ALIGNMENT + 8));
    }
  });

  it('leaves alone what has no weight to move or is not a model', () => {
    const relu = encodeOnnxModel({
      name: 'relu',
      opset: 13,
      inputs: [{ name: 'x', shape: [1, 2] }],
      outputs: [{ name: 'y', shape: [1, 2] }],
      initializers: [],
      nodes: [{ opType: 'Relu', inputs: ['x'], outputs: ['y'] }],
    });
    expect(alignWeights(relu)).toBeUndefined();
    expect(alignWeights(new TextEncoder().encode('not an onnx model'))).toBeUndefined();
    expect(alignWeights(wineModelBytes('m1', 1000).subarray(0, 2000))).toBeUndefined();
  });
});
