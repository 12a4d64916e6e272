import { expect } from '@jest/globals';
import { CUDA_OWN_SESSION_BYTES, sessionKindFor } from '../../../replica/onnx/session-kind.js';

describe('session kind', () => {
  it('shares graphs on the CPU whatever the size', () => {
    expect(sessionKindFor('cpu', 5e6, undefined)).toBe('shared_graph');
    expect(sessionKindFor('cpu', 2e9, undefined)).toBe('shared_graph');
  });

  it('gives a model at or above the threshold its own session under CUDA, weights resident', () => {
    expect(sessionKindFor('cuda', CUDA_OWN_SESSION_BYTES - 1, undefined)).toBe('shared_graph');
    expect(sessionKindFor('cuda', CUDA_OWN_SESSION_BYTES, undefined)).toBe('own_session');
  });

  it("follows the model's config.json either way", () => {
    expect(sessionKindFor('cuda', 2e9, true)).toBe('shared_graph');
    expect(sessionKindFor('cpu', 5e6, false)).toBe('own_session');
  });
});
