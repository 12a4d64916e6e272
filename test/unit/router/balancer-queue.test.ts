import { Balancer, type AcquireResult, type BalancerOptions, type Lease } from '../../../router/placement/balancer.js';
import { defaultPlacementPolicy } from '../../../router/placement/placement.js';
import { FakeTime } from './fake-time.js';

// What a long queue costs each release. Every decision reads the clock once, so the clock's
// reads count the decisions: a release used to decide every waiter, and a queue of 1,000 cost
// milliseconds of CPU per answer (a cold start at 1,000 gRPC calls/s on two cores collapsed
// into pool_saturated refusals).

const options: BalancerOptions = { ...defaultPlacementPolicy(1), matchTimeoutMs: 1000, recentMs: 5000, tableLagMs: 1000, maxQueue: 10_000 };

class CountingTime extends FakeTime {
  reads = 0;
  override now(): number {
    this.reads++;
    return super.now();
  }
}

function setup(): { b: Balancer; time: CountingTime } {
  const time = new CountingTime();
  const b = new Balancer(options, time, () => 0.5, time.setTimer);
  b.setReplicas(['a', 'b', 'c']);
  b.setTable('a', { version: 1, loaded: ['x'], loading: [], capacity: 8 });
  b.setTable('b', { version: 1, loaded: ['y'], loading: [], capacity: 8 });
  b.setTable('c', { version: 1, loaded: ['z'], loading: [], capacity: 8 });
  return { b, time };
}

function queue(b: Balancer, model: string): () => AcquireResult | undefined {
  let result: AcquireResult | undefined;
  b.acquire(model, (r) => (result = r));
  return () => result;
}

function leaseOf(r: AcquireResult | undefined): Lease {
  if (!r?.ok) throw new Error(`not placed: ${JSON.stringify(r)}`);
  return r.lease;
}

/** The clock reads, so the decisions, that `work` took. */
function readsOf(time: CountingTime, work: () => void): number {
  const before = time.reads;
  work();
  return time.reads - before;
}

describe('Balancer queue', () => {
  it('hands a freed slot to the first waiter that fits and decides no other while every replica is full', () => {
    const { b, time } = setup();
    const held = ['x', 'y', 'z'].map((m) => leaseOf(queue(b, m)()));
    const waiting = Array.from({ length: 600 }, (_, i) => ['x', 'y', 'z'][i % 3] as string).map((m) => queue(b, m));
    expect(waiting.every((w) => w() === undefined)).toBe(true);

    // y's holder frees: the first y waiter (the queue's second) takes it; every replica is full again.
    const reads = readsOf(time, () => b.release(held[1] as Lease));
    expect(leaseOf(waiting[1]?.())).toMatchObject({ replica: 'b', model: 'y', kind: 'holder' });
    expect(waiting.filter((w) => w() !== undefined)).toHaveLength(1);
    expect(reads).toBeLessThan(10);
  });

  it('decides a model once per pass while its holder is full and other replicas are free', () => {
    const { b, time } = setup();
    // Traffic to y and z keeps x's share low, so x is not copied: its waiters wait for a.
    for (let i = 0; i < 500; i++) for (const m of ['y', 'z']) b.release(leaseOf(queue(b, m)()));
    const x = leaseOf(queue(b, 'x')());
    const waiting = Array.from({ length: 300 }, () => queue(b, 'x'));
    expect(waiting.every((w) => w() === undefined)).toBe(true);

    // A new table from b runs a pass: b and c are free, yet no x waiter may go there yet.
    const reads = readsOf(time, () => b.setTable('b', { version: 2, loaded: ['y'], loading: [], capacity: 8 }));
    expect(waiting.every((w) => w() === undefined)).toBe(true);
    expect(reads).toBeLessThan(10);

    // a frees: the first x waiter takes it, in arrival order, and the rest wait on.
    b.release(x);
    expect(leaseOf(waiting[0]?.())).toMatchObject({ replica: 'a', model: 'x', kind: 'holder' });
    expect(waiting.slice(1).every((w) => w() === undefined)).toBe(true);

    // Past the matching timeout every x waiter may fall back to b and c, one slot each.
    time.advance(2000);
    expect(
      waiting
        .slice(1)
        .filter((w) => w() !== undefined)
        .map((w) => leaseOf(w()).replica)
        .sort(),
    ).toEqual(['b', 'c']);
  });
});
