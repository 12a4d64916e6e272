import { PATTERNS } from '../../../bench/simulator/patterns.js';
import { SCENARIOS } from '../../../bench/simulator/scenarios.js';
import { DEFAULT_PARAMS, simulate, type PolicyName, type SimParams, type SimResult } from '../../../bench/simulator/simulate.js';
import { targets } from '../../../bench/simulator/targets.js';

// The simulator is deterministic for a seed, so these are checks of placement logic, not timing.
// Full 60 s runs: the one-hot margins (about 1% on loads and p99) need that many requests.
const SEEDS = [42, 7];
const POLICIES: readonly PolicyName[] = ['modelmux', 'ray-like', 'ideal'];

function runAll(params: SimParams): SimResult[] {
  return PATTERNS.flatMap((pattern) => POLICIES.map((policy) => simulate(policy, pattern, params)));
}

const bySeed = new Map<number, SimResult[]>();
beforeAll(() => {
  for (const seed of SEEDS) bySeed.set(seed, runAll({ ...DEFAULT_PARAMS, seed }));
});

describe('placement simulator (bench/SIMULATOR.md)', () => {
  it('gives the same numbers for the same seed', () => {
    const short = { ...DEFAULT_PARAMS, durationMs: 8000, warmupMs: 1000 };
    expect(simulate('modelmux', 'zipf', short)).toEqual(simulate('modelmux', 'zipf', short));
  });

  it.each(SEEDS)('meets every target of issue 3 on every pattern with seed %i: loads ≤ 1.2× ideal and ≤ Ray-like, p99 wait < Ray-like', (seed) => {
    const met = targets(bySeed.get(seed) ?? []);
    expect(met).toEqual(PATTERNS.map((pattern) => ({ pattern, loadsVsIdeal: true, loadsVsRay: true, p99VsRay: true })));
  });

  it('serves the offered load without dropping requests on every pattern', () => {
    for (const results of bySeed.values()) {
      for (const pattern of PATTERNS) {
        const mine = results.find((r) => r.pattern === pattern && r.policy === 'modelmux');
        const ideal = results.find((r) => r.pattern === pattern && r.policy === 'ideal');
        expect(mine?.throughputPerS).toBeGreaterThan(0.97 * (ideal?.throughputPerS ?? Infinity));
      }
    }
  });

  it('loads close to the compulsory loads when the slots hold every model (2 replicas × 100 slots, 200 models)', () => {
    const fits = SCENARIOS.find((s) => s.params.slots !== undefined && s.params.models !== undefined && s.params.slots * (s.params.replicas ?? 1) >= s.params.models);
    expect(fits).toBeDefined();
    const params = { ...DEFAULT_PARAMS, ...fits?.params, durationMs: 30_000 };
    for (const pattern of PATTERNS) {
      const mine = simulate('modelmux', pattern, params);
      const ideal = simulate('ideal', pattern, params);
      // A few per 1000 above the ideal's first loads of models not seen in warm-up, where the
      // real benchmark showed 68–156 per 1000 before free slots were preferred.
      expect(mine.loadsPer1000).toBeLessThan(ideal.loadsPer1000 + 6);
    }
  });
});
