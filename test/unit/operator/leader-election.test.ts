import {
  ApiException,
  type CoordinationV1ApiCreateNamespacedLeaseRequest,
  type CoordinationV1ApiReplaceNamespacedLeaseRequest,
  type V1Lease,
  type V1LeaseSpec,
  type V1MicroTime,
} from '@kubernetes/client-node';
import { createLogger } from '../../../common/log.js';
import { LeaderElector, type ElectionClock, type LeaseApi } from '../../../operator/leader-election.js';
import { claimLease, leaseVerdict, observe, recordOf } from '../../../operator/lease-record.js';

const timing = { leaseDurationSeconds: 15, retryPeriodMs: 3000 };
const at = (iso: string): number => Date.parse(iso);
const silent = createLogger({ component: 'test' }, () => undefined);
/** A MicroTime as client-node hands it over from the wire: a string, though typed V1MicroTime. */
const wireTime = (iso: string): V1MicroTime => iso as unknown as V1MicroTime;

describe('observe and leaseVerdict', () => {
  const held: V1LeaseSpec = { holderIdentity: 'other', renewTime: wireTime('2026-01-01T00:00:00.000000Z'), leaseDurationSeconds: 15 };

  it('is free when there is no lease or no holder, and mine when I hold it whatever the times say', () => {
    expect(leaseVerdict(undefined, 'me', undefined, timing, 0)).toBe('free');
    expect(leaseVerdict({ holderIdentity: '' }, 'me', undefined, timing, 0)).toBe('free');
    const mine = { ...held, holderIdentity: 'me' };
    expect(leaseVerdict(mine, 'me', observe(undefined, mine, 0), timing, 1e12)).toBe('mine');
  });

  it('holds another’s lease for the lease duration of local time since its record last changed', () => {
    const seen = observe(undefined, held, 1000);
    expect(leaseVerdict(held, 'me', seen, timing, 1000 + 14_999)).toBe('held');
    expect(leaseVerdict(held, 'me', seen, timing, 1000 + 15_000)).toBe('free');
  });

  it('restarts the clock when the record changes, and only then', () => {
    const seen = observe(undefined, held, 1000);
    expect(observe(seen, { ...held }, 9000)).toBe(seen);
    const renewed = { ...held, renewTime: wireTime('2026-01-01T00:00:03.000000Z') };
    const again = observe(seen, renewed, 9000);
    expect(again.atMs).toBe(9000);
    expect(leaseVerdict(renewed, 'me', again, timing, 1000 + 15_000)).toBe('held');
    expect(recordOf(renewed)).not.toBe(recordOf(held));
    expect(recordOf({ ...held, leaseTransitions: 4 })).not.toBe(recordOf(held));
  });
});

describe('claimLease', () => {
  it('takes a lease from a former holder, counting the transition, with six fractional digits on the wire', () => {
    const next = claimLease({ holderIdentity: 'other', leaseTransitions: 2 }, 'me', timing, at('2026-01-01T00:00:00Z'));
    expect(JSON.parse(JSON.stringify(next))).toEqual({
      holderIdentity: 'me',
      leaseDurationSeconds: 15,
      renewTime: '2026-01-01T00:00:00.000000Z',
      acquireTime: '2026-01-01T00:00:00.000000Z',
      leaseTransitions: 3,
    });
  });

  it('renews without touching acquireTime or transitions', () => {
    const next = claimLease({ holderIdentity: 'me', acquireTime: wireTime('A'), leaseTransitions: 1 }, 'me', timing, at('2026-01-01T00:00:05Z'));
    expect(next.acquireTime).toBe('A');
    expect(next.leaseTransitions).toBe(1);
    expect(JSON.stringify(next.renewTime)).toBe('"2026-01-01T00:00:05.000000Z"');
  });
});

/**
 * A Lease as the API server keeps it: JSON on the wire (times come back as strings), a
 * resourceVersion bumped by every write, and 409 for a write based on an older one.
 */
class MemoryLeases implements LeaseApi {
  stored: V1Lease | undefined;
  private version = 0;

  readNamespacedLease(): Promise<V1Lease> {
    if (this.stored === undefined) return Promise.reject(new ApiException(404, 'NotFound', '{}', {}));
    return Promise.resolve(JSON.parse(JSON.stringify(this.stored)) as V1Lease);
  }

  createNamespacedLease(req: CoordinationV1ApiCreateNamespacedLeaseRequest): Promise<V1Lease> {
    if (this.stored !== undefined) return Promise.reject(new ApiException(409, 'AlreadyExists', '{}', {}));
    return Promise.resolve(this.store(req.body));
  }

  replaceNamespacedLease(req: CoordinationV1ApiReplaceNamespacedLeaseRequest): Promise<V1Lease> {
    if (req.body.metadata?.resourceVersion !== this.stored?.metadata?.resourceVersion) return Promise.reject(new ApiException(409, 'Conflict', '{}', {}));
    return Promise.resolve(this.store(req.body));
  }

  private store(body: V1Lease): V1Lease {
    const wire = JSON.parse(JSON.stringify(body)) as V1Lease;
    this.stored = { ...wire, metadata: { ...wire.metadata, resourceVersion: String(++this.version) } };
    return JSON.parse(JSON.stringify(this.stored)) as V1Lease;
  }
}

/** True time in ms; each process's clocks are offset from it: wall-clock skew, and an arbitrary monotonic origin. */
let trueMs = 0;
const clockOf = (wallSkewMs: number, monotonicOrigin: number): ElectionClock => ({
  monotonicMs: () => trueMs - monotonicOrigin,
  wallMs: () => at('2026-06-01T12:00:00Z') + trueMs + wallSkewMs,
});
const elector = (leases: LeaseApi, identity: string, clock: ElectionClock): LeaderElector => new LeaderElector(leases, 'ns', 'lease', identity, timing, silent, clock);

const MINUTE = 60_000;

describe.each([
  ['five minutes ahead', 5 * MINUTE],
  ['five minutes behind', -5 * MINUTE],
  ['an hour behind', -60 * MINUTE],
])('a holder whose clock runs %s', (_label, skewMs) => {
  it('keeps the lease while it renews, and loses it one lease duration (local time) after it stops', async () => {
    trueMs = 0;
    const leases = new MemoryLeases();
    const holder = elector(leases, 'holder', clockOf(skewMs, -777_000));
    const candidate = elector(leases, 'candidate', clockOf(0, 31_000));
    expect(await holder.tryAcquireOrRenew()).toBe(true);

    // A minute of renewals every retry period, the candidate trying every second.
    for (trueMs = 1000; trueMs <= MINUTE; trueMs += 1000) {
      if (trueMs % timing.retryPeriodMs === 0) expect(await holder.tryAcquireOrRenew()).toBe(true);
      expect(await candidate.tryAcquireOrRenew()).toBe(false);
    }
    expect(leases.stored?.spec?.holderIdentity).toBe('holder');

    // The holder goes silent; its last renewal was at 60 s and the candidate saw it at 60 s.
    const lastRenewal = MINUTE;
    let tookAt: number | undefined;
    for (trueMs = MINUTE + 1000; trueMs <= MINUTE + 30_000 && tookAt === undefined; trueMs += 1000) {
      if (await candidate.tryAcquireOrRenew()) tookAt = trueMs;
    }
    expect(tookAt).toBe(lastRenewal + timing.leaseDurationSeconds * 1000);
    expect(leases.stored?.spec).toMatchObject({ holderIdentity: 'candidate', leaseTransitions: 1 });
    // The former holder, back, finds the lease taken.
    expect(await holder.tryAcquireOrRenew()).toBe(false);
  });
});

describe('LeaderElector', () => {
  it('makes a candidate that finds a silent holder wait a whole lease duration from its first look', async () => {
    trueMs = 0;
    const leases = new MemoryLeases();
    expect(await elector(leases, 'gone', clockOf(0, 0)).tryAcquireOrRenew()).toBe(true);
    trueMs = 10 * MINUTE;
    const late = elector(leases, 'late', clockOf(0, 5));
    expect(await late.tryAcquireOrRenew()).toBe(false);
    trueMs += 14_999;
    expect(await late.tryAcquireOrRenew()).toBe(false);
    trueMs += 1;
    expect(await late.tryAcquireOrRenew()).toBe(true);
  });

  it('lets one of two candidates racing for a free lease win: the other’s write is refused', async () => {
    trueMs = 0;
    const leases = new MemoryLeases();
    const results = await Promise.all([elector(leases, 'a', clockOf(0, 0)).tryAcquireOrRenew(), elector(leases, 'b', clockOf(0, 0)).tryAcquireOrRenew()]);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(leases.stored?.spec?.holderIdentity).toBe(results[0] ? 'a' : 'b');
  });

  it('frees the lease on release, so a candidate takes it at once', async () => {
    trueMs = 0;
    const leases = new MemoryLeases();
    const leader = elector(leases, 'leader', clockOf(0, 0));
    const candidate = elector(leases, 'candidate', clockOf(0, 0));
    expect(await leader.tryAcquireOrRenew()).toBe(true);
    expect(await candidate.tryAcquireOrRenew()).toBe(false);
    await leader.release();
    expect(leases.stored?.spec?.holderIdentity).toBe('');
    expect(await candidate.tryAcquireOrRenew()).toBe(true);
  });
});
