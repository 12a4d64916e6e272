import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { slotList } from './comma-list.js';
import { pairedDifference, spreadOf, summarizeCell, totalCpuUs, type SpreadWindow } from './spread-parts.js';
import type { PatternName } from './traffic.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.

const close = (actual: number | undefined, expected: number): void => assert.ok(actual !== undefined && Math.abs(actual - expected) < 1e-10, `${actual} is not ${expected}`);

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
    assert.equal(totalCpuUs(w(8, 'uniform', 1, 1000, 700)), 896);
  });

  it("takes a cell's medians over its rounds, and nothing for a cell never measured", () => {
    const ws = [w(8, 'uniform', 1, 1000, 700, 900), w(8, 'uniform', 2, 1400, 600, 880), w(8, 'uniform', 3, 1100, 650, 910), w(200, 'uniform', 1, 5000, 1)];
    const s = summarizeCell(ws, { slots: 8, pattern: 'uniform' });
    assert.deepEqual(
      { rounds: s?.rounds, failed: s?.failed, throughputRps: s?.throughputRps, loadsPer1000: s?.loadsPer1000, totalCpuUs: s?.totalCpuUs, replicas: s?.cpuUs.replicas },
      { rounds: 3, failed: 3, throughputRps: 1100, loadsPer1000: 900, totalCpuUs: 846, replicas: 650 },
    );
    assert.equal(summarizeCell(ws, { slots: 8, pattern: 'zipf' }), undefined);
  });

  it("measures a pool's spread by the patterns' median throughputs, naming the slowest and the fastest", () => {
    // Replica CPU 600 and 800 for uniform, 500 for one-hot and zipf: all CPU medians 896 and 696.
    const ws = [w(8, 'uniform', 1, 800, 600), w(8, 'uniform', 2, 900, 800), w(8, 'one-hot', 1, 1000, 500), w(8, 'one-hot', 2, 1000, 500), w(8, 'zipf', 1, 950, 500), w(200, 'uniform', 1, 10, 0)];
    const sp = spreadOf(ws, 8, ['uniform', 'one-hot', 'zipf']);
    assert.equal(sp?.slowest, 'uniform');
    assert.equal(sp?.fastest, 'one-hot');
    close(sp?.percent, 15);
    close(sp?.cpuPercent, 100 * (1 - 696 / 896));
    assert.equal(spreadOf(ws, 200, ['uniform', 'one-hot']), undefined);
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
    assert.equal(d?.rounds, 3);
    close(d?.throughputRatio, 0.8);
    assert.equal(d?.cpuUs.replicas, 200);
    assert.equal(d?.cpuUs.router, 0);
    assert.equal(d?.totalCpuUs, 200);
    assert.equal(pairedDifference(ws, { slots: 8, pattern: 'uniform' }, { slots: 200, pattern: 'uniform' }), undefined);
  });

  it('takes --slots as distinct positive integers', () => {
    assert.deepEqual(slotList('8,200').parse(undefined), [8, 200]);
    assert.deepEqual(slotList('8').parse(' 4, 16'), [4, 16]);
    for (const bad of ['8,8', '0,8', '8,x', '2.5']) assert.equal(slotList('8').safeParse(bad).success, false, bad);
  });
});
