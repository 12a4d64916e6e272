import { Balancer, type AcquireResult, type BalancerOptions, type Lease, type TryWatcher } from '../../../router/placement/balancer.js';
import { FakeTime } from './fake-time.js';

// What the balancer adds around the pure outlier, budget and latency rules (ADR 0030): who is
// told when a replica is marked down, the cap on ejections, and which tries count as warm.

const options: BalancerOptions = {
  maxOngoingRequests: 4,
  spreadAt: 4,
  loadFactor: 1.25,
  loadFloor: 1,
  spreadPerCopy: 3,
  copyShare: 1,
  trafficSlack: 2,
  matchTimeoutMs: 1000,
  recentMs: 5000,
  tableLagMs: 1000,
  maxQueue: 8,
  outliers: { consecutiveFailures: 2, ejectionMs: 1000, maxEjectionMs: 8000, maxEjectedPercent: 50 },
  retryBudgetPercent: 20,
};

function setup(replicas: string[] = ['a', 'b', 'c']): { b: Balancer; time: FakeTime } {
  const time = new FakeTime();
  const b = new Balancer(options, time, () => 0.5, time.setTimer);
  b.setReplicas(replicas);
  return { b, time };
}

function lease(b: Balancer, model: string | undefined, exclude?: Set<string>): Lease {
  let result: AcquireResult | undefined;
  b.acquire(model, (r) => (result = r), exclude);
  if (!result?.ok) throw new Error(`not placed: ${JSON.stringify(result)}`);
  return result.lease;
}

/** A try that records when it is told its replica is down. */
function watcher(): TryWatcher & { told: number } {
  const w = { told: 0, replicaDown: () => void w.told++, watchedAt: undefined, watchSlot: -1 };
  return w;
}

describe('Balancer, retries and outliers', () => {
  it('tells the tries waiting at a replica that leaves the route, once the new set is in place, and no others', () => {
    const { b } = setup();
    b.setTable('a', { version: 1, loaded: ['m'], loading: [], capacity: 4 });
    b.setTable('b', { version: 1, loaded: ['n'], loading: [], capacity: 4 });
    const atA = lease(b, 'm');
    const atB = lease(b, 'n');
    expect([atA.replica, atB.replica]).toEqual(['a', 'b']);
    const wa = watcher();
    const wb = watcher();
    const done = watcher();
    b.watch(atA, wa);
    b.watch(atA, done);
    b.unwatch(atA, done);
    b.watch(atB, wb);
    let liveWhenTold: string[] = [];
    wa.replicaDown = () => {
      wa.told++;
      liveWhenTold = b.replicaNames();
    };
    b.setReplicas(['b', 'c']);
    expect([wa.told, wb.told, done.told]).toEqual([1, 0, 0]);
    expect(liveWhenTold).toEqual(['b', 'c']);
  });

  it('ejects after consecutive failures, tells the tries waiting there, and lets placement have it back after the ejection', () => {
    const { b, time } = setup();
    b.setTable('a', { version: 1, loaded: ['m'], loading: [], capacity: 4 });
    const waiting = lease(b, 'm');
    const w = watcher();
    b.watch(waiting, w);
    expect(b.reportTry('a', 'm', 'failed')).toBe(0);
    expect(w.told).toBe(0);
    expect(b.reportTry('a', 'm', 'failed')).toBe(1000);
    expect(w.told).toBe(1);
    expect(lease(b, 'm').replica).not.toBe('a');
    time.advance(1000);
    expect(lease(b, 'm', new Set(['b', 'c'])).replica).toBe('a');
  });

  it('never ejects more than its share of the route, so a pool slow everywhere keeps serving', () => {
    const { b } = setup(['a', 'b', 'c', 'd']);
    // 50% of four: two at once.
    expect(b.reportTry('a', undefined, 'refused')).toBe(1000);
    expect(b.reportTry('b', undefined, 'refused')).toBe(1000);
    expect(b.reportTry('c', undefined, 'refused')).toBe(0);
    for (let i = 0; i < 20; i++) {
      const l = lease(b, undefined);
      expect(['c', 'd']).toContain(l.replica);
      b.release(l);
    }
  });

  it('grants a retry only with another replica in placement, and within the retry budget', () => {
    const { b, time } = setup(['a', 'b']);
    expect(b.takeRetry('a', new Set())).toBe('taken');
    expect(b.takeRetry('a', new Set(['b']))).toBe('no_other_replica');
    // Without requests the budget is 5 a second over 10 s: 50, of which one is spent.
    for (let i = 0; i < 49; i++) expect(b.takeRetry('a', new Set())).toBe('taken');
    expect(b.takeRetry('a', new Set())).toBe('budget_spent');
    // 100 requests pay for 20 more.
    for (let i = 0; i < 100; i++) b.requested();
    for (let i = 0; i < 20; i++) expect(b.takeRetry('a', new Set())).toBe('taken');
    expect(b.takeRetry('a', new Set())).toBe('budget_spent');
    time.advance(10_000);
    expect(b.takeRetry('a', new Set())).toBe('taken');
  });

  it('calls a try warm only at a replica that has the model loaded, not loading, nor merely sent there', () => {
    const { b } = setup(['a']);
    const placed = (model: string | undefined): Lease => {
      const l = lease(b, model);
      b.release(l);
      return l;
    };
    b.setTable('a', { version: 1, loaded: ['up'], loading: ['coming'], capacity: 4 });
    expect(placed('up')).toMatchObject({ kind: 'holder', warm: true });
    expect(placed('coming')).toMatchObject({ kind: 'holder', warm: false });
    expect(placed('new')).toMatchObject({ kind: 'cold', warm: false });
    // Sent there just now: a holder, but until the replica says so, its try may be the load.
    expect(placed('new')).toMatchObject({ kind: 'holder', warm: false });
    b.observe('a', 'new');
    expect(placed('new')).toMatchObject({ kind: 'holder', warm: true });
    expect(placed(undefined)).toMatchObject({ kind: 'no_model', warm: true });
  });

  it("judges a model by its own recent latency once it has enough tries, by the route's before", () => {
    const { b } = setup(['a']);
    expect(b.recentP99('slow')).toBeUndefined();
    for (let i = 0; i < 30; i++) b.reportTry('a', `fast${i}`, 'answered', 4);
    // 30 route samples at 4 ms: the route's p99 (a bucket bound within 25%).
    const route = b.recentP99('slow') ?? 0;
    expect(route).toBeGreaterThanOrEqual(4);
    expect(route).toBeLessThan(5);
    for (let i = 0; i < 20; i++) b.reportTry('a', 'slow', 'answered', 400);
    const own = b.recentP99('slow') ?? 0;
    expect(own).toBeGreaterThanOrEqual(400);
    expect(own).toBeLessThan(500);
  });
});
