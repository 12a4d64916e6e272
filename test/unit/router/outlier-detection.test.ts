import { maxEjected, OutlierState, type OutlierPolicy } from '../../../router/placement/outlier-detection.js';

const policy: OutlierPolicy = { consecutiveFailures: 3, ejectionMs: 1000, maxEjectionMs: 5000, maxEjectedPercent: 50 };

describe('OutlierState', () => {
  it('ejects after the configured failures in a row, and an answer in between starts the count again', () => {
    const o = new OutlierState();
    expect(o.record('failed', 0, policy, true)).toBe(0);
    expect(o.record('failed', 1, policy, true)).toBe(0);
    expect(o.record('answered', 2, policy, true)).toBe(0);
    expect(o.record('failed', 3, policy, true)).toBe(0);
    expect(o.record('failed', 4, policy, true)).toBe(0);
    expect(o.record('failed', 5, policy, true)).toBe(1000);
    expect(o.isEjected(5)).toBe(true);
    expect(o.isEjected(1004)).toBe(true);
    expect(o.isEjected(1005)).toBe(false);
  });

  it('ejects at once on a refused connection', () => {
    const o = new OutlierState();
    expect(o.record('refused', 0, policy, true)).toBe(1000);
  });

  it('ignores failures of tries sent before the ejection while it lasts', () => {
    const o = new OutlierState();
    o.record('refused', 0, policy, true);
    for (let t = 1; t < 10; t++) expect(o.record('failed', t, policy, true)).toBe(0);
    expect(o.ejectedUntil).toBe(1000);
  });

  it('puts a replica back from an ejection on probation: its first failure ejects it again for twice as long, up to the cap', () => {
    const o = new OutlierState();
    let now = 0;
    const lengths: number[] = [];
    for (let i = 0; i < 5; i++) {
      const ms = o.record('refused', now, policy, true) || o.record('failed', now, policy, true);
      lengths.push(ms);
      now += ms;
    }
    expect(lengths).toEqual([1000, 2000, 4000, 5000, 5000]);
    // An answer clears the backoff and the probation: three failures again, one second again.
    o.record('answered', now, policy, true);
    expect(o.record('failed', now, policy, true)).toBe(0);
    expect(o.record('failed', now, policy, true)).toBe(0);
    expect(o.record('failed', now, policy, true)).toBe(1000);
  });

  it('does not eject when the route has no room, and ejects at the next failure once it has', () => {
    const o = new OutlierState();
    expect(o.record('refused', 0, policy, false)).toBe(0);
    expect(o.isEjected(0)).toBe(false);
    expect(o.record('refused', 1, policy, true)).toBe(1000);
  });
});

describe('maxEjected', () => {
  it('allows the share of the route, and at least one replica', () => {
    expect([1, 2, 3, 4, 10].map((n) => maxEjected(n, 50))).toEqual([1, 1, 1, 2, 5]);
    expect(maxEjected(10, 0)).toBe(1);
    expect(maxEjected(10, 100)).toBe(10);
  });
});
