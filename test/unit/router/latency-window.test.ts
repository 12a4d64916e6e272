import { LatencyWindows } from '../../../router/placement/latency-window.js';
import { adaptiveTryTimeoutMs, type TryTimeoutPolicy } from '../../../router/exchange/try-timeout.js';

describe('LatencyWindows', () => {
  it('reads the 99th percentile within a quarter above the truth', () => {
    const w = new LatencyWindows(30_000, 8);
    for (let i = 1; i <= 1000; i++) w.record('m', i / 10, 0); // 0.1 … 100 ms
    const p99 = w.p99('m', 0, 20) ?? 0;
    expect(p99).toBeGreaterThanOrEqual(99);
    expect(p99).toBeLessThanOrEqual(99 * 1.25);
  });

  it("falls back to the route's percentile for a model with too few tries, and to nothing for a route with too few", () => {
    const w = new LatencyWindows(30_000, 8);
    for (let i = 0; i < 19; i++) w.record('a', 10, 0);
    expect(w.p99('a', 0, 20)).toBeUndefined();
    w.record(undefined, 10, 0);
    expect(w.p99('b', 0, 20)).toBeGreaterThanOrEqual(10);
    expect(w.p99('a', 0, 20)).toBeGreaterThanOrEqual(10);
  });

  it('remembers the current and the previous window only', () => {
    const w = new LatencyWindows(1000, 8);
    for (let i = 0; i < 20; i++) w.record('m', 500, 0);
    for (let i = 0; i < 20; i++) w.record('m', 5, 1500);
    // Window 1 still sees window 0's slow tries.
    expect(w.p99('m', 1500, 20)).toBeGreaterThanOrEqual(500);
    // Window 2: window 0 is gone, window 1's fast tries remain.
    expect(w.p99('m', 2500, 20)).toBeLessThan(7);
    // After a gap of a whole window, nothing is known.
    expect(w.p99('m', 4000, 20)).toBeUndefined();
  });

  it('tracks at most maxKeys models, dropping the one refreshed longest ago', () => {
    const w = new LatencyWindows(1000, 2);
    for (let i = 0; i < 20; i++) w.record('old', 300, 0);
    for (let i = 0; i < 20; i++) w.record('kept', 300, 0);
    // 'old' is refreshed in a later window, so 'kept' is now the one refreshed longest ago.
    w.record('old', 300, 1000);
    for (let i = 0; i < 20; i++) w.record('new', 3, 1000);
    expect(w.p99('old', 1000, 20)).toBeGreaterThanOrEqual(300);
    expect(w.p99('new', 1000, 20)).toBeLessThan(4);
    // 'kept' was dropped: judged by the route, whose tries are mostly 300 ms.
    w.record(undefined, 3, 1000);
    expect(w.p99('kept', 1000, 21)).toBe(w.p99(undefined, 1000, 21));
  });
});

describe('adaptiveTryTimeoutMs', () => {
  const policy: TryTimeoutPolicy = { floorMs: 1000, multiple: 5, capMs: 30_000 };

  it('is the multiple of the p99 between the floor and the cap, and the cap when nothing is known', () => {
    expect(adaptiveTryTimeoutMs(undefined, policy)).toBe(30_000);
    expect(adaptiveTryTimeoutMs(3, policy)).toBe(1000);
    expect(adaptiveTryTimeoutMs(400, policy)).toBe(2000);
    expect(adaptiveTryTimeoutMs(20_000, policy)).toBe(30_000);
  });
});
