import { decide, leastOfTwo, rendezvousPick, type PlacementPolicy, type PlacementRequest, type ReplicaLoad } from '../../../router/placement/placement.js';
import { rendezvousRank } from '../../../router/placement/rendezvous.js';
import { draws } from './fake-time.js';

const policy: PlacementPolicy = { maxOngoingRequests: 4, spreadAt: 2, loadFactor: 1.25, loadFloor: 2, spreadPerCopy: 3, copyShare: 1, trafficSlack: 2 };
// Full replicas of 4 slots whose next victim nobody asks for, with no traffic history: the
// new rules are neutral unless a test sets them.
const r = (name: string, inFlight: number, holds = false, modelInFlight = 0, pending = false, more: Partial<ReplicaLoad> = {}): ReplicaLoad => ({
  name,
  inFlight,
  holds,
  modelInFlight,
  pending,
  freeSlots: 0,
  capacity: 4,
  victimShare: 0,
  traffic: 0,
  tier: 'store',
  ...more,
});
/** A request for `model` that draws all the traffic (share 1), before its matching timeout unless said. */
const req = (model: string | undefined, timedOut = false, share = 1): PlacementRequest => ({ model, share, timedOut });
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
    expect(decide(req('m1'), reps, policy, draws(0.5))).toEqual({ kind: 'holder', replica: 'b' });
  });

  it('picks the less busy of two random holders', () => {
    const reps = [r('a', 1, true), r('b', 0, true), r('c', 0)];
    expect(decide(req('m1'), reps, policy, draws(0.0, 0.0))).toEqual({ kind: 'holder', replica: 'b' });
  });

  it('adds a copy, placed by rendezvous, once every holder passes the spread threshold', () => {
    const reps = [r('a', 2, true), r('b', 0), r('c', 0), r('d', 0)];
    const d = decide(req('m1'), reps, policy, draws());
    const expected = rendezvousRank(reps.slice(1), 'm1')[0]?.name;
    expect(d).toEqual({ kind: 'new_copy', replica: expected });
  });

  it('copies a model that itself keeps the holders busy before they reach the spread threshold', () => {
    const p = { ...policy, maxOngoingRequests: 16, spreadAt: 8, loadFloor: 3, spreadPerCopy: 3 };
    const busyWithOthers = [r('a', 5, true, 1), r('b', 0), r('c', 0)];
    expect(decide(req('m1'), busyWithOthers, p, draws(0.0))).toEqual({ kind: 'holder', replica: 'a' });
    const busyWithIt = [r('a', 5, true, 3), r('b', 0), r('c', 0)];
    expect(decide(req('m1'), busyWithIt, p, draws()).kind).toBe('new_copy');
  });

  it('starts no second copy while the last one is not yet confirmed by a table or a response', () => {
    const reps = [r('a', 2, true), r('b', 2, true, 0, true), r('c', 0), r('d', 0)];
    expect(decide(req('m1'), reps, policy, draws(0.0, 0.0)).kind).toBe('holder');
    const confirmed = [r('a', 2, true), r('b', 2, true), r('c', 0), r('d', 0)];
    expect(decide(req('m1'), confirmed, policy, draws()).kind).toBe('new_copy');
  });

  it('keeps using a holder that is below the spread threshold', () => {
    const reps = [r('a', 2, true), r('b', 1, true), r('c', 0)];
    expect(decide(req('m1'), reps, policy, draws(0.0, 0.0))).toEqual({ kind: 'holder', replica: 'b' });
  });

  it('waits when every holder is full and no other replica is cool, then falls back after the timeout', () => {
    const reps = [r('a', 4, true), r('b', 2), r('c', 3)];
    expect(decide(req('m1'), reps, policy, draws())).toEqual({ kind: 'wait' });
    const after = decide(req('m1', true), reps, policy, draws());
    expect(after.kind).toBe('fallback_after_timeout');
    expect(['b', 'c']).toContain((after as { replica: string }).replica);
  });

  it('waits when every replica is full, even after the timeout', () => {
    const reps = [r('a', 4, true), r('b', 4)];
    expect(decide(req('m1', true), reps, policy, draws())).toEqual({ kind: 'wait' });
    expect(decide(req(undefined, true), reps, policy, draws())).toEqual({ kind: 'wait' });
  });

  it('places a cold model on the same replica whatever the caller’s in-flight view, below the spread threshold', () => {
    for (let i = 0; i < 200; i++) {
      const model = `model-${i}`;
      const viewA = names.map((n, k) => r(n, k % 2));
      const viewB = names.map((n, k) => r(n, (k + 1) % 2));
      const a = decide(req(model), viewA, policy, draws());
      const b = decide(req(model), viewB, policy, draws());
      expect(a.kind).toBe('cold');
      expect(a).toEqual(b);
      expect(a).toEqual({ kind: 'cold', replica: rendezvousRank(viewA, model)[0]?.name });
    }
  });

  it('skips a cold model’s first replica when it is past the load bound', () => {
    const model = 'm7';
    const first =
      rendezvousRank(
        names.map((n) => r(n, 0)),
        model,
      )[0]?.name ?? '';
    const reps = names.map((n) => r(n, n === first ? 3 : 0));
    const d = decide(req(model), reps, policy, draws());
    expect(d.kind).toBe('cold');
    expect((d as { replica: string }).replica).not.toBe(first);
  });

  it('gives a model one more copy only while its share of traffic needs more copies than it has', () => {
    // Four replicas, holders past spreadAt: share × 4 / copies must exceed copyShare (1).
    const oneHolder = [r('a', 2, true), r('b', 0), r('c', 0), r('d', 0)];
    expect(decide(req('m1', false, 0.2), oneHolder, policy, draws(0.0)).kind).toBe('holder');
    expect(decide(req('m1', false, 0.3), oneHolder, policy, draws()).kind).toBe('new_copy');
    const twoHolders = [r('a', 2, true), r('b', 2, true), r('c', 0), r('d', 0)];
    expect(decide(req('m1', false, 0.5), twoHolders, policy, draws(0.0, 0.0)).kind).toBe('holder');
    expect(decide(req('m1', false, 0.6), twoHolders, policy, draws()).kind).toBe('new_copy');
  });

  it('puts a cold model on a replica with a free slot before a full one, in rendezvous order among them', () => {
    const model = 'm3';
    const order = rendezvousRank(
      names.map((n) => r(n, 0)),
      model,
    ).map((x) => x.name);
    const [first, second, third] = order;
    const free = new Set([second, third]);
    const reps = names.map((n) => r(n, 0, false, 0, false, { freeSlots: free.has(n) ? 1 : 0 }));
    expect(decide(req(model), reps, policy, draws())).toEqual({ kind: 'cold', replica: second });
    expect(first).not.toBe(second);
  });

  it('keeps a cold model off a full replica whose next victim draws more than an average slot’s traffic', () => {
    // 4 replicas × 4 slots: an average slot draws 1/16 of the traffic.
    const model = 'm4';
    const [first, second] = rendezvousRank(
      names.map((n) => r(n, 0)),
      model,
    ).map((x) => x.name);
    const hotVictim = names.map((n) => r(n, 0, false, 0, false, { victimShare: n === first ? 0.07 : 0.01 }));
    expect(decide(req(model), hotVictim, policy, draws())).toEqual({ kind: 'cold', replica: second });
    const coldVictim = names.map((n) => r(n, 0, false, 0, false, { victimShare: n === first ? 0.06 : 0.01 }));
    expect(decide(req(model), coldVictim, policy, draws())).toEqual({ kind: 'cold', replica: first });
  });

  it('keeps a new model off a replica whose recent sends are significantly above the average, unless it has a free slot', () => {
    const model = 'm5';
    const [first, second] = rendezvousRank(
      names.map((n) => r(n, 0)),
      model,
    ).map((x) => x.name);
    // Mean 175, bound 175 + 2 × √175 ≈ 201.5.
    const busy = names.map((n) => r(n, 0, false, 0, false, { traffic: n === first ? 400 : 100 }));
    expect(decide(req(model), busy, policy, draws())).toEqual({ kind: 'cold', replica: second });
    // Mean 100, bound 120: 115 is within chance.
    const noise = names.map((n) => r(n, 0, false, 0, false, { traffic: n === first ? 115 : 95 }));
    expect(decide(req(model), noise, policy, draws())).toEqual({ kind: 'cold', replica: first });
    const busyWithRoom = names.map((n) => r(n, 0, false, 0, false, { traffic: n === first ? 400 : 100, freeSlots: n === first ? 1 : 0 }));
    expect(decide(req(model), busyWithRoom, policy, draws())).toEqual({ kind: 'cold', replica: first });
  });

  it('puts a missed model where its bytes are warmest: host memory, then disk, then the store', () => {
    const model = 'm6';
    const [first, second, third, fourth] = rendezvousRank(
      names.map((n) => r(n, 0)),
      model,
    ).map((x) => x.name);
    const tiers = (host: string | undefined, disk: string | undefined) => names.map((n) => r(n, 0, false, 0, false, { tier: n === host ? 'host' : n === disk ? 'disk' : 'store' }));
    expect(decide(req(model), tiers(third, second), policy, draws())).toEqual({ kind: 'cold', replica: third });
    expect(decide(req(model), tiers(undefined, fourth), policy, draws())).toEqual({ kind: 'cold', replica: fourth });
    expect(decide(req(model), tiers(undefined, undefined), policy, draws())).toEqual({ kind: 'cold', replica: first });
  });

  it('prefers a warm tier over a free slot, but never evicts a hot model for it', () => {
    const model = 'm7';
    const [first, second] = rendezvousRank(
      names.map((n) => r(n, 0)),
      model,
    ).map((x) => x.name);
    const freeFirst = names.map((n) => r(n, 0, false, 0, false, { freeSlots: n === first ? 1 : 0, tier: n === second ? 'host' : 'store' }));
    expect(decide(req(model), freeFirst, policy, draws())).toEqual({ kind: 'cold', replica: second });
    // 4 replicas × 4 slots: a victim drawing 0.07 is hotter than an average slot.
    const hotVictim = names.map((n) => r(n, 0, false, 0, false, { victimShare: n === second ? 0.07 : 0.01, tier: n === second ? 'host' : 'store' }));
    expect(decide(req(model), hotVictim, policy, draws())).toEqual({ kind: 'cold', replica: first });
  });

  it('keeps the load bound over the tier: a busy replica holding the bytes in memory is skipped', () => {
    const model = 'm8';
    const [first, second] = rendezvousRank(
      names.map((n) => r(n, 0)),
      model,
    ).map((x) => x.name);
    // Total in flight 3, mean bound max(2, ceil(1.25 × 4 / 4)) = 2: 3 in flight is past it.
    const reps = names.map((n) => r(n, n === second ? 3 : 0, false, 0, false, { tier: n === second ? 'host' : 'store' }));
    expect(decide(req(model), reps, policy, draws())).toEqual({ kind: 'cold', replica: first });
  });

  it('sends a request without a model id to the less loaded of two random replicas', () => {
    const reps = [r('a', 3), r('b', 1), r('c', 2)];
    expect(decide(req(undefined), reps, policy, draws(0.0, 0.0))).toEqual({ kind: 'no_model', replica: 'b' });
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
