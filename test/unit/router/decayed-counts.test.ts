import { DecayedCounts } from '../../../router/placement/decayed-counts.js';

describe('DecayedCounts', () => {
  it('counts events in the same millisecond fully and halves them every half-life', () => {
    const c = new DecayedCounts(1000);
    c.add('a', 5000);
    c.add('a', 5000);
    c.add('b', 5000);
    expect(c.count('a', 5000)).toBe(2);
    expect(c.total(5000)).toBe(3);
    expect(c.count('a', 6000)).toBeCloseTo(1, 10);
    expect(c.total(7000)).toBeCloseTo(0.75, 10);
    expect(c.count('never', 7000)).toBe(0);
  });

  it('decays what was counted before adding the new event, per key and in total', () => {
    const c = new DecayedCounts(1000);
    c.add('a', 0);
    c.add('a', 1000);
    expect(c.count('a', 1000)).toBeCloseTo(1.5, 10);
    c.add('b', 2000);
    expect(c.count('a', 2000)).toBeCloseTo(0.75, 10);
    expect(c.total(2000)).toBeCloseTo(1.75, 10);
    expect(c.share('b', 2000)).toBeCloseTo(1 / 1.75, 10);
    expect(c.share('a', 2000) + c.share('b', 2000)).toBeCloseTo(1, 10);
  });

  it('forgets keys that decayed away once many keys were seen, and keeps the recent ones', () => {
    const c = new DecayedCounts(10);
    for (let i = 0; i < 4095; i++) c.add(`old${i}`, 0);
    c.add('recent', 1000);
    expect(c.count('old0', 1000)).toBe(0);
    expect(c.count('recent', 1000)).toBe(1);
    c.add('recent', 1000);
    expect(c.count('recent', 1000)).toBe(2);
  });
});
