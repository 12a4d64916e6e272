import { decide, leastOfTwo, rendezvousPick, type PlacementPolicy, type ReplicaLoad } from '../../../router/placement.js';
import { rendezvousRank } from '../../../router/rendezvous.js';
import { draws } from './fake-time.js';

const policy: PlacementPolicy = { maxOngoingRequests: 4, spreadAt: 2, loadFactor: 1.25, loadFloor: 2, spreadPerCopy: 3 };
const r = (name: string, inFlight: number, holds = false, modelInFlight = 0, pending = false): ReplicaLoad => ({ name, inFlight, holds, modelInFlight, pending });
const names = ['a', 'b', 'c', 'd'];

describe('leastOfTwo', () => {
  it('takes the less loaded of the two drawn replicas', () => {
    const reps = [r('a', 3), r('b', 1), r('c', 0)];
    // draw 0.0 → index 0 (a); draw 0.4 → index 0 of the remaining two, shifted past a → b.
    expect(leastOfTwo(reps, draws(0.0, 0.4))?.name).toBe('b');
  });

  it('never draws the same replica twice', () => {
    const reps = [r('a', 5), r('b', 0)];
    expect(leastOfTwo(reps, draws(0.0, 0.0))?.name).toBe('b');
    expect(leastOfTwo(reps, draws(0.99, 0.99))?.name).toBe('b');
  });
});

describe('decide', () => {
  it('sends a request to a holder of its model rather than a cooler replica', () => {
    const reps = [r('a', 0), r('b', 1, true), r('c', 0)];
    expect(decide('m1', reps, policy, draws(0.5), false)).toEqual({ kind: 'holder', replica: 'b' });
  });

  it('picks the less busy of two random holders', () => {
    const reps = [r('a', 1, true), r('b', 0, true), r('c', 0)];
    expect(decide('m1', reps, policy, draws(0.0, 0.0), false)).toEqual({ kind: 'holder', replica: 'b' });
  });

  it('adds a copy, placed by rendezvous, once every holder passes the spread threshold', () => {
    const reps = [r('a', 2, true), r('b', 0), r('c', 0), r('d', 0)];
    const d = decide('m1', reps, policy, draws(), false);
    const expected = rendezvousRank(reps.slice(1), 'm1')[0]?.name;
    expect(d).toEqual({ kind: 'new_copy', replica: expected });
  });

  it('copies a model that itself keeps the holders busy before they reach the spread threshold', () => {
    const p = { ...policy, maxOngoingRequests: 16, spreadAt: 8, loadFloor: 3, spreadPerCopy: 3 };
    const busyWithOthers = [r('a', 5, true, 1), r('b', 0), r('c', 0)];
    expect(decide('m1', busyWithOthers, p, draws(0.0), false)).toEqual({ kind: 'holder', replica: 'a' });
    const busyWithIt = [r('a', 5, true, 3), r('b', 0), r('c', 0)];
    expect(decide('m1', busyWithIt, p, draws(), false).kind).toBe('new_copy');
  });

  it('starts no second copy while the last one is not yet confirmed by a table or a response', () => {
    const reps = [r('a', 2, true), r('b', 2, true, 0, true), r('c', 0), r('d', 0)];
    expect(decide('m1', reps, policy, draws(0.0, 0.0), false).kind).toBe('holder');
    const confirmed = [r('a', 2, true), r('b', 2, true), r('c', 0), r('d', 0)];
    expect(decide('m1', confirmed, policy, draws(), false).kind).toBe('new_copy');
  });

  it('keeps using a holder that is below the spread threshold', () => {
    const reps = [r('a', 2, true), r('b', 1, true), r('c', 0)];
    expect(decide('m1', reps, policy, draws(0.0, 0.0), false)).toEqual({ kind: 'holder', replica: 'b' });
  });

  it('waits when every holder is full and no other replica is cool, then falls back after the timeout', () => {
    const reps = [r('a', 4, true), r('b', 2), r('c', 3)];
    expect(decide('m1', reps, policy, draws(), false)).toEqual({ kind: 'wait' });
    const after = decide('m1', reps, policy, draws(), true);
    expect(after.kind).toBe('fallback_after_timeout');
    expect(['b', 'c']).toContain((after as { replica: string }).replica);
  });

  it('waits when every replica is full, even after the timeout', () => {
    const reps = [r('a', 4, true), r('b', 4)];
    expect(decide('m1', reps, policy, draws(), true)).toEqual({ kind: 'wait' });
    expect(decide(undefined, reps, policy, draws(), true)).toEqual({ kind: 'wait' });
  });

  it('places a cold model on the same replica whatever the caller’s in-flight view, below the spread threshold', () => {
    for (let i = 0; i < 200; i++) {
      const model = `model-${i}`;
      const viewA = names.map((n, k) => r(n, k % 2));
      const viewB = names.map((n, k) => r(n, (k + 1) % 2));
      const a = decide(model, viewA, policy, draws(), false);
      const b = decide(model, viewB, policy, draws(), false);
      expect(a.kind).toBe('cold');
      expect(a).toEqual(b);
      expect(a).toEqual({ kind: 'cold', replica: rendezvousRank(viewA, model)[0]?.name });
    }
  });

  it('skips a cold model’s first replica when it is past the load bound', () => {
    const model = 'm7';
    const first = rendezvousRank(names.map((n) => r(n, 0)), model)[0]?.name ?? '';
    const reps = names.map((n) => r(n, n === first ? 3 : 0));
    const d = decide(model, reps, policy, draws(), false);
    expect(d.kind).toBe('cold');
    expect((d as { replica: string }).replica).not.toBe(first);
  });

  it('sends a request without a model id to the less loaded of two random replicas', () => {
    const reps = [r('a', 3), r('b', 1), r('c', 2)];
    expect(decide(undefined, reps, policy, draws(0.0, 0.0), false)).toEqual({ kind: 'no_model', replica: 'b' });
  });

  it('falls back to the least loaded open replica when all are past the bound', () => {
    const reps = [r('a', 3), r('b', 2), r('c', 3)];
    expect(rendezvousPick('x', reps, reps, { ...policy, spreadAt: 1, loadFactor: 0.5, loadFloor: 1 }, 4, true)?.name).toBe('b');
    expect(rendezvousPick('x', reps, reps, { ...policy, spreadAt: 1, loadFactor: 0.5, loadFloor: 1 }, 4, false)).toBeUndefined();
  });
});

describe('rendezvous hashing', () => {
  const many = Array.from({ length: 8 }, (_, i) => ({ name: `replica-${i}` }));
  const models = Array.from({ length: 4000 }, (_, i) => `model-${i}`);

  it('spreads models evenly over replicas (each within 20% of the mean over 4000 models)', () => {
    const counts = new Map<string, number>();
    for (const m of models) {
      const top = rendezvousRank(many, m)[0]?.name ?? '';
      counts.set(top, (counts.get(top) ?? 0) + 1);
    }
    for (const rep of many) expect(Math.abs((counts.get(rep.name) ?? 0) - 500)).toBeLessThan(100);
  });

  it('moves only the removed replica’s models when one replica goes away', () => {
    const fewer = many.filter((x) => x.name !== 'replica-3');
    for (const m of models) {
      const before = rendezvousRank(many, m)[0]?.name;
      const after = rendezvousRank(fewer, m)[0]?.name;
      if (before !== 'replica-3') expect(after).toBe(before);
    }
  });
});
