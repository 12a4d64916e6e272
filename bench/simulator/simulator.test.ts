import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PATTERNS } from './patterns.js';
import { SCENARIOS } from './scenarios.js';
import { DEFAULT_PARAMS, simulate, type PolicyName, type SimResult } from './simulate.js';
import { targets } from './targets.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.
// The simulator is deterministic for a seed, so these check placement logic, not timing.
// Full 60 s runs: the one-hot margins (about 1% on loads and p99) need that many requests.
const SEEDS = [42, 7];
const POLICIES: readonly PolicyName[] = ['modelmux', 'ray-like', 'ideal'];

const bySeed = new Map<number, SimResult[]>(SEEDS.map((seed) => [seed, PATTERNS.flatMap((pattern) => POLICIES.map((policy) => simulate(policy, pattern, { ...DEFAULT_PARAMS, seed })))]));

describe('placement simulator', () => {
  it('gives the same numbers for the same seed', () => {
    const short = { ...DEFAULT_PARAMS, durationMs: 8000, warmupMs: 1000 };
    assert.deepEqual(simulate('modelmux', 'zipf', short), simulate('modelmux', 'zipf', short));
  });

  for (const seed of SEEDS) {
    it(`meets every target of issue 3 on every pattern with seed ${seed}: loads ≤ 1.2× ideal and ≤ Ray-like, p99 wait < Ray-like`, () => {
      assert.deepEqual(
        targets(bySeed.get(seed) ?? []),
        PATTERNS.map((pattern) => ({ pattern, loadsVsIdeal: true, loadsVsRay: true, p99VsRay: true })),
      );
    });
  }

  it('serves the offered load without dropping requests on every pattern', () => {
    for (const results of bySeed.values()) {
      for (const pattern of PATTERNS) {
        const mine = results.find((r) => r.pattern === pattern && r.policy === 'modelmux');
        const ideal = results.find((r) => r.pattern === pattern && r.policy === 'ideal');
        assert.ok((mine?.throughputPerS ?? 0) > 0.97 * (ideal?.throughputPerS ?? Infinity), pattern);
      }
    }
  });

  it('loads close to the compulsory loads when the slots hold every model (2 replicas × 100 slots, 200 models)', () => {
    const fits = SCENARIOS.find((s) => s.params.slots !== undefined && s.params.models !== undefined && s.params.slots * (s.params.replicas ?? 1) >= s.params.models);
    assert.ok(fits);
    const params = { ...DEFAULT_PARAMS, ...fits.params, durationMs: 30_000 };
    for (const pattern of PATTERNS) {
      const mine = simulate('modelmux', pattern, params);
      const ideal = simulate('ideal', pattern, params);
      // A few per 1000 above the ideal's first loads of models not seen in warm-up, where the
      // real benchmark showed 68–156 per 1000 before free slots were preferred.
      assert.ok(mine.loadsPer1000 < ideal.loadsPer1000 + 6, `${pattern}: ${mine.loadsPer1000} against ${ideal.loadsPer1000}`);
    }
  });
});
