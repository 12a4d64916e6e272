import { writeOrder } from '../../../replica/model-folders.js';
import { inferenceError, lostModels } from '../../../replica/runtime-backend.js';

describe('sidecar mode, pure parts', () => {
  it('writes the files a runtime scans for after every other file of the folder', () => {
    expect(writeOrder(['model-settings.json', 'model.joblib', 'b/x.bin'])).toEqual(['b/x.bin', 'model.joblib', 'model-settings.json']);
    expect(writeOrder(['config.pbtxt', '1/model.onnx'])).toEqual(['1/model.onnx', 'config.pbtxt']);
  });

  it('forgets models the runtime no longer lists, but not a load that ended after the index was asked for', () => {
    const loadedAt = new Map([
      ['a', 100],
      ['b', 100],
      ['late', 250],
    ]);
    expect(lostModels(loadedAt, 200, new Set(['a']))).toEqual(['b']);
    // A runtime that is not ready holds nothing that was loaded before the look.
    expect(lostModels(loadedAt, 200, undefined)).toEqual(['a', 'b']);
    expect(lostModels(loadedAt, 300, new Set(['a', 'b', 'late']))).toEqual([]);
  });

  it("maps a runtime's refusals to the catalogue", () => {
    const answer = (status: number) => ({ status, body: Buffer.from('{"error":"x"}') });
    expect(inferenceError('m', answer(400)).code).toBe('invalid_request');
    expect(inferenceError('m', answer(422)).code).toBe('invalid_request');
    expect(inferenceError('m', answer(404)).code).toBe('runtime_unavailable');
    expect(inferenceError('m', answer(503)).code).toBe('runtime_unavailable');
    expect(inferenceError('m', answer(500)).code).toBe('inference_failed');
  });
});
