import { Balancer, type AcquireResult, type BalancerOptions, type Lease } from '../../../router/placement/balancer.js';
import { rendezvousRank } from '../../../router/placement/rendezvous.js';
import { draws, FakeTime } from './fake-time.js';

/** A model id whose rendezvous order over the replicas a, b, c starts with `first`. */
function rankedFirst(first: string, not: readonly string[] = []): string {
  for (let i = 0; ; i++) {
    const m = `x${i}`;
    if (
      !not.includes(m) &&
      rendezvousRank(
        ['a', 'b', 'c'].map((name) => ({ name })),
        m,
      )[0]?.name === first
    )
      return m;
  }
}

const options: BalancerOptions = {
  maxOngoingRequests: 1,
  spreadAt: 1,
  loadFactor: 1.25,
  loadFloor: 1,
  spreadPerCopy: 3,
  copyShare: 1,
  trafficSlack: 2,
  matchTimeoutMs: 1000,
  recentMs: 5000,
  tableLagMs: 1000,
  maxQueue: 2,
};

function setup(random: () => number = draws(), opts: Partial<BalancerOptions> = {}): { b: Balancer; time: FakeTime } {
  const time = new FakeTime();
  const b = new Balancer({ ...options, ...opts }, time, random, time.setTimer);
  b.setReplicas(['a', 'b', 'c']);
  return { b, time };
}

function take(b: Balancer, model: string | undefined, exclude?: Set<string>): { result: () => AcquireResult | undefined; cancel: () => void } {
  let result: AcquireResult | undefined;
  const cancel = b.acquire(model, (r) => (result = r), exclude);
  return { result: () => result, cancel };
}

function leaseOf(r: AcquireResult | undefined): Lease {
  if (!r?.ok) throw new Error(`not placed: ${JSON.stringify(r)}`);
  return r.lease;
}

const replicaOf = (r: AcquireResult | undefined): string => leaseOf(r).replica;

describe('Balancer', () => {
  it('places a miss on the replica whose table has the model in host memory, then on one with it on disk', () => {
    const { b } = setup();
    const m = rankedFirst('a');
    b.setTable('a', { version: 1, loaded: [], loading: [], capacity: 8 });
    b.setTable('b', { version: 1, loaded: [], loading: [], capacity: 8, disk: [m] });
    b.setTable('c', { version: 1, loaded: [], loading: [], capacity: 8, host: [m], disk: [m] });
    const first = take(b, m);
    expect(leaseOf(first.result())).toMatchObject({ replica: 'c', kind: 'cold', warm: false });
    const n = rankedFirst('a', [m]);
    b.setTable('b', { version: 2, loaded: [], loading: [], capacity: 8, disk: [n] });
    expect(replicaOf(take(b, n).result())).toBe('b');
  });

  it('routes a model listed in a table to that replica', () => {
    const { b } = setup(draws(0.5));
    b.setTable('c', { version: 1, loaded: ['m1'], loading: [], capacity: 8 });
    const t = take(b, 'm1');
    expect(t.result()).toEqual({ ok: true, lease: { replica: 'c', model: 'm1', kind: 'holder', waitedMs: 0, warm: true } });
  });

  it('remembers where it just sent a model until recentMs has passed', () => {
    const { b, time } = setup(draws(0.5, 0.5));
    const lease = leaseOf(take(b, 'm1').result());
    const first = lease.replica;
    b.release(lease);
    time.advance(4000);
    const again = take(b, 'm1').result();
    expect(again).toMatchObject({ ok: true, lease: { replica: first, kind: 'holder' } });
    b.release(leaseOf(again));
    time.advance(5001);
    // Forgotten: the cold placement is rendezvous again, which happens to agree, but the kind says cold.
    expect(take(b, 'm1').result()).toMatchObject({ ok: true, lease: { replica: first, kind: 'cold' } });
  });

  it('forgets a holder learnt from a response once a table at least that new omits the model', () => {
    const { b } = setup(draws(0.5, 0.5, 0.5));
    b.setTable('b', { version: 3, loaded: ['other'], loading: [], capacity: 8 });
    b.observe('b', 'm9', 5);
    // An older table cannot know about m9: b still holds it.
    b.setTable('b', { version: 4, loaded: ['other'], loading: [], capacity: 8 });
    const held = take(b, 'm9').result();
    expect(held).toMatchObject({ ok: true, lease: { replica: 'b', kind: 'holder' } });
    b.release(leaseOf(held));
    // Version 5 is the one the response spoke at: without m9 it says m9 was evicted since.
    b.setTable('b', { version: 6, loaded: ['other'], loading: [], capacity: 8 });
    expect(take(b, 'm9').result()).toMatchObject({ ok: true, lease: { kind: 'cold' } });
  });

  it('learns a holder from a response header', () => {
    const { b } = setup(draws(0.5));
    b.observe('b', 'm9');
    expect(take(b, 'm9').result()).toMatchObject({ ok: true, lease: { replica: 'b', kind: 'holder' } });
  });

  it('hands a freed holder slot to a waiting request before its matching timeout', () => {
    // Draws: the first placement, the timeout, the placement once the slot frees.
    const { b, time } = setup(draws(0.5, 0.5, 0.5));
    b.setReplicas(['a']);
    b.setTable('a', { version: 1, loaded: ['m1'], loading: [], capacity: 8 });
    const first = take(b, 'm1');
    const firstLease = leaseOf(first.result());
    expect(firstLease.replica).toBe('a');
    const second = take(b, 'm1');
    expect(second.result()).toBeUndefined();
    expect(b.queueDepth).toBe(1);
    time.advance(300);
    b.release(firstLease);
    expect(second.result()).toEqual({ ok: true, lease: { replica: 'a', model: 'm1', kind: 'holder', waitedMs: 300, warm: true } });
    expect(b.queueDepth).toBe(0);
  });

  it('places a request elsewhere once its drawn matching timeout in [t, 2t] has passed', () => {
    // a is full of m1, b is busy past the spread threshold with m2, so no copy can go out:
    // five holder draws, then the timeout draw 0.25 → 1250 ms.
    const { b, time } = setup(draws(0.5, 0.5, 0.5, 0.5, 0.5, 0.25), { maxOngoingRequests: 3, spreadAt: 2 });
    b.setReplicas(['a', 'b']);
    b.setTable('a', { version: 1, loaded: ['m1'], loading: [], capacity: 8 });
    b.setTable('b', { version: 1, loaded: ['m2'], loading: [], capacity: 8 });
    for (const m of ['m2', 'm2', 'm1', 'm1', 'm1']) expect(take(b, m).result()).toMatchObject({ ok: true, lease: { kind: 'holder' } });
    expect([b.inFlight('a'), b.inFlight('b')]).toEqual([3, 2]);
    const waiting = take(b, 'm1');
    expect(waiting.result()).toBeUndefined();
    time.advance(1249);
    expect(waiting.result()).toBeUndefined();
    time.advance(1);
    expect(waiting.result()).toEqual({ ok: true, lease: { replica: 'b', model: 'm1', kind: 'fallback_after_timeout', waitedMs: 1250, warm: false } });
  });

  it('answers pool_saturated once the wait queue is full, and no_replicas for an empty route', () => {
    const { b } = setup(() => 0.5);
    for (let i = 0; i < 3; i++) take(b, undefined);
    take(b, undefined);
    take(b, undefined);
    const over = take(b, undefined);
    expect(over.result()).toMatchObject({ ok: false, error: { code: 'pool_saturated', status: 503 } });
    const empty = setup().b;
    empty.setReplicas([]);
    expect(take(empty, 'm1').result()).toMatchObject({ ok: false, error: { code: 'no_replicas' } });
  });

  it('drops a cancelled waiter from the queue', () => {
    const { b } = setup(() => 0.5);
    const leases = [0, 1, 2].map(() => leaseOf(take(b, undefined).result()));
    const w = take(b, undefined);
    expect(b.queueDepth).toBe(1);
    w.cancel();
    expect(b.queueDepth).toBe(0);
    b.release(leases[0] as Lease);
    expect(w.result()).toBeUndefined();
  });

  it('keeps an excluded or ejected replica out of placement', () => {
    const { b, time } = setup(draws(0.5, 0.5, 0.5));
    b.setTable('a', { version: 1, loaded: ['m1'], loading: [], capacity: 8 });
    const excluded = leaseOf(take(b, 'm1', new Set(['a'])).result());
    expect(excluded.replica).not.toBe('a');
    b.release(excluded);
    // A refused connection ejects at once, for the default first ejection of 2 s.
    expect(b.reportTry('a', 'm1', 'refused')).toBe(2000);
    const ejected = leaseOf(take(b, 'm1').result());
    expect(ejected.replica).not.toBe('a');
    b.release(ejected);
    time.advance(2000);
    expect(replicaOf(take(b, 'm1', new Set(['b', 'c'])).result())).toBe('a');
  });

  it('ignores an older table version but accepts a restarted replica’s empty table', () => {
    const { b } = setup(draws(0.5, 0.5));
    b.setTable('a', { version: 5, loaded: ['m1', 'm2'], loading: [], capacity: 8 });
    b.setTable('a', { version: 4, loaded: ['m1', 'm2', 'm3'], loading: [], capacity: 8 });
    expect(take(b, 'm3').result()).toMatchObject({ lease: { kind: 'cold' } });
    b.setTable('a', { version: 0, loaded: [], loading: [], capacity: 8 });
    expect(take(b, 'm1').result()).toMatchObject({ lease: { kind: 'cold' } });
  });

  it('prefers a replica with a free slot for a cold model, counting the models it sent there since the table', () => {
    const { b } = setup(() => 0.5, { maxOngoingRequests: 4, spreadAt: 2, loadFloor: 2 });
    b.setTable('a', { version: 1, loaded: ['p', 'q'], loading: [], capacity: 2 });
    b.setTable('b', { version: 1, loaded: ['r'], loading: [], capacity: 2 });
    b.setTable('c', { version: 1, loaded: ['s', 't'], loading: [], capacity: 2 });
    const first = rankedFirst('a');
    const toB = leaseOf(take(b, first).result());
    expect(toB).toMatchObject({ replica: 'b', kind: 'cold' });
    b.release(toB);
    // b's last slot is taken by that send although no table shows it yet: rendezvous again.
    const next = rankedFirst('a', [first]);
    expect(leaseOf(take(b, next).result())).toMatchObject({ replica: 'a', kind: 'cold' });
  });

  it('spares a replica whose least recently used model is still asked for, skipping one victim per model it sent there since', () => {
    // Traffic bound out of the way: this test is about victims.
    const { b } = setup(() => 0.5, { maxOngoingRequests: 4, spreadAt: 4, loadFloor: 4, trafficSlack: 1000 });
    b.setTable('a', { version: 1, loaded: ['y', 'hot'], loading: [], capacity: 2 });
    b.setTable('b', { version: 1, loaded: ['z', 'w'], loading: [], capacity: 2 });
    b.setTable('c', { version: 1, loaded: ['v', 'u'], loading: [], capacity: 2 });
    for (let i = 0; i < 4; i++) b.release(leaseOf(take(b, 'hot').result()));
    const cold = rankedFirst('a', ['hot']);
    const spared = leaseOf(take(b, cold).result());
    expect(spared.replica).not.toBe('a');
    b.release(spared);
    // The next victim on a, once one model went there, is y (asked for by nobody): a is fine again.
    b.setTable('a', { version: 2, loaded: ['hot', 'y'], loading: [], capacity: 2 });
    const other = rankedFirst('a', ['hot', cold]);
    expect(leaseOf(take(b, other).result())).toMatchObject({ replica: 'a', kind: 'cold' });
  });

  it('keeps new models off a replica that took far more than its part of recent sends, and forgets it after some half-lives', () => {
    const { b, time } = setup(() => 0.5, { maxOngoingRequests: 4, spreadAt: 4, loadFloor: 4 });
    for (const n of ['a', 'b', 'c']) b.setTable(n, { version: 1, loaded: n === 'a' ? ['h', 'g'] : ['k', 'l'], loading: [], capacity: 2 });
    for (let i = 0; i < 30; i++) b.release(leaseOf(take(b, 'h').result()));
    const cold = rankedFirst('a', ['h']);
    const away = leaseOf(take(b, cold).result());
    expect(away.replica).not.toBe('a');
    b.release(away);
    // Counts halve every 10 s: after 100 s the 30 sends weigh 0.03, within chance of the mean.
    time.advance(100_000);
    const later = rankedFirst('a', ['h', cold]);
    expect(leaseOf(take(b, later).result())).toMatchObject({ replica: 'a', kind: 'cold' });
  });

  it('copies a busy model only while its share of requests needs another copy', () => {
    // One slot per replica: a holder with one request in flight is full and hot.
    const busy = setup(() => 0.5);
    busy.b.setTable('a', { version: 1, loaded: ['m'], loading: [], capacity: 8 });
    leaseOf(take(busy.b, 'm').result());
    expect(leaseOf(take(busy.b, 'm').result()).kind).toBe('new_copy');

    const mixed = setup(() => 0.5);
    mixed.b.setTable('a', { version: 1, loaded: ['m'], loading: [], capacity: 8 });
    for (let i = 0; i < 10; i++) mixed.b.release(leaseOf(take(mixed.b, `o${i}`).result()));
    leaseOf(take(mixed.b, 'm').result());
    // m is 2 of 12 recent requests: 3 replicas × 1/6 = half a replica's traffic, one copy serves it.
    const second = take(mixed.b, 'm');
    expect(second.result()).toBeUndefined();
    mixed.time.advance(2000);
    expect(leaseOf(second.result()).kind).toBe('fallback_after_timeout');
  });
});
