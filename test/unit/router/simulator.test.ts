import { PATTERNS } from '../../../bench/simulator/patterns.js';
import { DEFAULT_PARAMS, simulate, type PolicyName, type SimResult } from '../../../bench/simulator/simulate.js';
import { targets } from '../../../bench/simulator/targets.js';

// The simulator is deterministic for a seed, so these are checks of placement logic, not timing.
const results: SimResult[] = [];
const result = (pattern: string, policy: PolicyName): SimResult => {
  const r = results.find((x) => x.pattern === pattern && x.policy === policy);
  if (!r) throw new Error(`no result for ${pattern}/${policy}`);
  return r;
};

beforeAll(() => {
  for (const pattern of PATTERNS) for (const policy of ['modelmux', 'ray-like', 'ideal'] as const) results.push(simulate(policy, pattern));
});

describe('placement simulator (bench/SIMULATOR.md)', () => {
  it('gives the same numbers for the same seed', () => {
    expect(simulate('modelmux', 'zipf', { ...DEFAULT_PARAMS, durationMs: 8000, warmupMs: 1000 })).toEqual(simulate('modelmux', 'zipf', { ...DEFAULT_PARAMS, durationMs: 8000, warmupMs: 1000 }));
  });

  it('loads at most 1.2× the ideal and no more than the Ray-like baseline on uniform, one-hot and Zipf traffic', () => {
    for (const t of targets(results).filter((x) => x.pattern !== 'five-popular')) expect(t).toEqual({ pattern: t.pattern, loadsVsIdeal: true, loadsVsRay: true, p99VsRay: t.p99VsRay });
  });

  it('keeps the p99 wait below the Ray-like baseline on uniform, five-popular and Zipf traffic, by a third on Zipf', () => {
    for (const p of ['uniform', 'five-popular', 'zipf']) expect(result(p, 'modelmux').p99WaitMs).toBeLessThan(result(p, 'ray-like').p99WaitMs);
    expect(result('zipf', 'modelmux').p99WaitMs).toBeLessThan((2 / 3) * result('zipf', 'ray-like').p99WaitMs);
  });

  it('stays within 5% of the Ray-like baseline where it does not beat it (one-hot p99 wait, five-popular loads)', () => {
    expect(result('one-hot', 'modelmux').p99WaitMs).toBeLessThan(1.05 * result('one-hot', 'ray-like').p99WaitMs);
    expect(result('five-popular', 'modelmux').loadsPer1000).toBeLessThan(1.05 * result('five-popular', 'ray-like').loadsPer1000);
  });

  it('serves the offered load without dropping requests on every pattern', () => {
    for (const p of PATTERNS) expect(result(p, 'modelmux').throughputPerS).toBeGreaterThan(0.97 * result(p, 'ideal').throughputPerS);
  });
});
