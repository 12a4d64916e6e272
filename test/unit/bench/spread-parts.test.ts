import { pairedDifference, spreadOf, summarizeCell, totalCpuUs, type SpreadWindow } from '../../../bench/lib/spread-parts.js';
import { slotList } from '../../../bench/lib/comma-list.js';
import type { PatternName } from '../../../bench/lib/traffic.js';

const w = (slots: number, pattern: PatternName, round: number, throughputRps: number, replicas: number, loadsPer1000 = 0): SpreadWindow => ({
  slots,
  pattern,
  round,
  throughputRps,
  failed: round === 2 ? 3 : 0,
  loadsPer1000,
  cpuUs: { replicas, router: 100, local: 5, store: 1, loadGenerator: 90 },
});

describe("bench:spread's arithmetic", () => {
  it("sums a window's CPU over every process group", () => {
    expect(totalCpuUs(w(8, 'uniform', 1, 1000, 700))).toBe(896);
  });

  it("takes a cell's medians over its rounds, and nothing for a cell never measured", () => {
    const ws = [w(8, 'uniform', 1, 1000, 700, 900), w(8, 'uniform', 2, 1400, 600, 880), w(8, 'uniform', 3, 1100, 650, 910), w(200, 'uniform', 1, 5000, 1)];
    const s = summarizeCell(ws, { slots: 8, pattern: 'uniform' });
    expect(s).toMatchObject({ rounds: 3, failed: 3, throughputRps: 1100, loadsPer1000: 900, totalCpuUs: 846 });
    expect(s?.cpuUs.replicas).toBe(650);
    expect(summarizeCell(ws, { slots: 8, pattern: 'zipf' })).toBeUndefined();
  });

  it("measures a pool's spread by the patterns' median throughputs, naming the slowest and the fastest", () => {
    // Replica CPU 600 and 800 for uniform, 500 for one-hot and zipf: all CPU medians 896 and 696.
    const ws = [w(8, 'uniform', 1, 800, 600), w(8, 'uniform', 2, 900, 800), w(8, 'one-hot', 1, 1000, 500), w(8, 'one-hot', 2, 1000, 500), w(8, 'zipf', 1, 950, 500), w(200, 'uniform', 1, 10, 0)];
    const sp = spreadOf(ws, 8, ['uniform', 'one-hot', 'zipf']);
    expect(sp?.slowest).toBe('uniform');
    expect(sp?.fastest).toBe('one-hot');
    expect(sp?.percent).toBeCloseTo(15, 10);
    expect(sp?.cpuPercent).toBeCloseTo(100 * (1 - 696 / 896), 10);
    expect(spreadOf(ws, 200, ['uniform', 'one-hot'])).toBeUndefined();
  });

  it('compares two cells round by round, so a slow round slows both sides of a difference', () => {
    // Round 2 runs everything at half speed and twice the CPU: per-round ratios stay 0.8,
    // where the ratio of the medians over rounds would not.
    const ws = [
      w(8, 'uniform', 1, 800, 700),
      w(8, 'one-hot', 1, 1000, 500),
      w(8, 'uniform', 2, 400, 1400),
      w(8, 'one-hot', 2, 500, 1000),
      w(8, 'uniform', 3, 1600, 350),
      w(8, 'one-hot', 3, 2000, 250),
      // A round with one side only is left out.
      w(8, 'uniform', 4, 10, 9999),
    ];
    const d = pairedDifference(ws, { slots: 8, pattern: 'uniform' }, { slots: 8, pattern: 'one-hot' });
    expect(d?.rounds).toBe(3);
    expect(d?.throughputRatio).toBeCloseTo(0.8, 10);
    expect(d?.cpuUs.replicas).toBe(200);
    expect(d?.cpuUs.router).toBe(0);
    expect(d?.totalCpuUs).toBe(200);
    expect(pairedDifference(ws, { slots: 8, pattern: 'uniform' }, { slots: 200, pattern: 'uniform' })).toBeUndefined();
  });

  it('takes --slots as distinct positive integers', () => {
    expect(slotList('8,200').parse(undefined)).toEqual([8, 200]);
    expect(slotList('8').parse(' 4, 16')).toEqual([4, 16]);
    for (const bad of ['8,8', '0,8', '8,x', '2.5']) expect(slotList('8').safeParse(bad).success).toBe(false);
  });
});
