import type { SplitBackend } from '../../../common/model-route.js';
import { mirrored, stickyBackend, weightedBackend } from '../../../router/routes/route-split.js';
import { rewriteModelHeaders, rewriteV2Path } from '../../../router/routes/route-rewrite.js';

const backends = (...w: [string, number][]): SplitBackend[] => w.map(([model, weight]) => ({ model, weight }));

describe('weightedBackend', () => {
  it('cuts [0, 1) in proportion to the weights and never picks a weight of 0', () => {
    const b = backends(['a', 90], ['z', 0], ['b', 10]);
    expect(weightedBackend(b, 0)).toBe('a');
    expect(weightedBackend(b, 0.8999)).toBe('a');
    expect(weightedBackend(b, 0.9)).toBe('b');
    expect(weightedBackend(b, 0.999999999)).toBe('b');
    const counts = { a: 0, b: 0, z: 0 } as Record<string, number>;
    for (let i = 0; i < 10_000; i++) counts[weightedBackend(b, i / 10_000)]! += 1;
    expect(counts).toEqual({ a: 9000, b: 1000, z: 0 });
  });
});

describe('stickyBackend', () => {
  const keys = Array.from({ length: 20_000 }, (_, i) => `user-${i}`);

  it('sends one key to one backend every time', () => {
    const b = backends(['v1', 50], ['v2', 50]);
    for (const k of keys.slice(0, 100)) expect(stickyBackend(b, k)).toBe(stickyBackend(b, k));
  });

  it('gives each backend its weight’s share of keys (within 5 sigma)', () => {
    const share = keys.filter((k) => stickyBackend(backends(['v1', 90], ['v2', 10]), k) === 'v2').length / keys.length;
    const sigma = Math.sqrt((0.1 * 0.9) / keys.length);
    expect(Math.abs(share - 0.1)).toBeLessThan(5 * sigma);
  });

  it('moves only keys towards the canary when its weight grows from 10 to 20', () => {
    const before = keys.map((k) => stickyBackend(backends(['v1', 90], ['v2', 10]), k));
    const after = keys.map((k) => stickyBackend(backends(['v1', 80], ['v2', 20]), k));
    const moved = keys.filter((_, i) => before[i] !== after[i]);
    expect(keys.filter((_, i) => before[i] === 'v2' && after[i] === 'v1')).toEqual([]);
    // About the 10% of users the canary gained, not a reshuffle.
    expect(moved.length / keys.length).toBeGreaterThan(0.08);
    expect(moved.length / keys.length).toBeLessThan(0.12);
  });

  it('keeps every other user in place when a third backend is added', () => {
    const before = keys.map((k) => stickyBackend(backends(['v1', 50], ['v2', 50]), k));
    const after = keys.map((k) => stickyBackend(backends(['v1', 50], ['v2', 50], ['v3', 10]), k));
    expect(keys.filter((_, i) => before[i] !== after[i] && after[i] !== 'v3')).toEqual([]);
  });
});

describe('mirrored', () => {
  it('copies the given percentage of draws', () => {
    expect(mirrored(5, 0.049)).toBe(true);
    expect(mirrored(5, 0.05)).toBe(false);
    expect(mirrored(0, 0)).toBe(false);
    expect(mirrored(100, 0.9999)).toBe(true);
  });
});

describe('rewriting a request for its backend', () => {
  it('replaces the V2 id, and a version, with the backend id', () => {
    expect(rewriteV2Path('/v2/models/wine-7/infer', 'wine-7@2')).toBe('/v2/models/wine-7@2/infer');
    expect(rewriteV2Path('/v2/models/wine-7/versions/3/infer', 'wine-7@1')).toBe('/v2/models/wine-7@1/infer');
    expect(rewriteV2Path('/v2/models/wine-7/ready', 'x')).toBe('/v2/models/x/ready');
    expect(rewriteV2Path('/v2/models/wine-7', 'x')).toBe('/v2/models/x');
  });

  it('writes a backend that is an archive key with its slashes as %2F, one path segment the replica decodes back', () => {
    expect(rewriteV2Path('/v2/models/wine/infer', 'tenant/7/model.tar.gz')).toBe('/v2/models/tenant%2F7%2Fmodel.tar.gz/infer');
  });

  it('replaces every model header, whatever its case, and nothing else', () => {
    const h = ['Serve_Multiplexed_Model_Id', 'wine-7', 'x-amzn-sagemaker-target-model', 'wine-7', 'x-user-id', 'wine-7'];
    rewriteModelHeaders(h, 'wine-7@2');
    expect(h).toEqual(['Serve_Multiplexed_Model_Id', 'wine-7@2', 'x-amzn-sagemaker-target-model', 'wine-7@2', 'x-user-id', 'wine-7']);
  });
});
