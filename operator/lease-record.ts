import { V1MicroTime, type V1LeaseSpec } from '@kubernetes/client-node';

/**
 * The pure rules of leader election over a coordination.k8s.io Lease, after client-go's
 * leaderelection: a candidate never compares the holder's renewTime with its own wall clock
 * (the two clocks may disagree by minutes); it notes when, on its own monotonic clock, it last
 * saw the record change, and takes the lease only once the record has stood still for a whole
 * lease duration of its own time.
 */

export interface ElectionTiming {
  /** How long a lease whose record does not change holds. */
  leaseDurationSeconds: number;
  /** How often the leader renews and a candidate retries. */
  retryPeriodMs: number;
}

/** What this process last saw of the lease: its record, and the local monotonic time the record took that value. */
export interface Observation {
  readonly record: string;
  readonly atMs: number;
}

export type LeaseVerdict = 'mine' | 'free' | 'held';

/** A MicroTime as the API server wrote it: client-node hands it over as a string, or a Date when it made it. */
function timeText(t: unknown): string {
  return t instanceof Date ? t.toISOString() : typeof t === 'string' ? t : '';
}

/** The fields whose change shows the holder alive (client-go compares the whole record). */
export function recordOf(spec: V1LeaseSpec): string {
  return JSON.stringify([spec.holderIdentity ?? '', timeText(spec.renewTime), timeText(spec.acquireTime), spec.leaseTransitions ?? 0, spec.leaseDurationSeconds ?? 0]);
}

/** The observation after reading `spec` at `nowMs`: its clock restarts only when the record changed. */
export function observe(previous: Observation | undefined, spec: V1LeaseSpec, nowMs: number): Observation {
  const record = recordOf(spec);
  return previous !== undefined && previous.record === record ? previous : { record, atMs: nowMs };
}

/**
 * Who may hold the lease at local monotonic time `nowMs`, given `observed` (the observation of
 * this very spec): no lease or an empty holder frees it; another holder keeps it until its
 * record has not changed for the lease duration it states (else `timing`'s).
 */
export function leaseVerdict(spec: V1LeaseSpec | undefined, identity: string, observed: Observation | undefined, timing: ElectionTiming, nowMs: number): LeaseVerdict {
  if (spec === undefined) return 'free';
  const holder = spec.holderIdentity ?? '';
  if (holder === identity) return 'mine';
  if (holder === '') return 'free';
  if (observed === undefined || observed.record !== recordOf(spec)) return 'held';
  const durationMs = (spec.leaseDurationSeconds ?? timing.leaseDurationSeconds) * 1000;
  return nowMs - observed.atMs >= durationMs ? 'free' : 'held';
}

/**
 * The lease after `identity` takes or renews it at wall-clock `wallMs`. renewTime is written
 * for people and tools reading the Lease; no candidate's decision depends on it.
 */
export function claimLease(spec: V1LeaseSpec | undefined, identity: string, timing: ElectionTiming, wallMs: number): V1LeaseSpec {
  const now = new V1MicroTime(wallMs);
  const before = spec ?? {};
  const taking = before.holderIdentity !== identity;
  return {
    ...before,
    holderIdentity: identity,
    leaseDurationSeconds: timing.leaseDurationSeconds,
    renewTime: now,
    ...(taking ? { acquireTime: now, leaseTransitions: (before.leaseTransitions ?? 0) + (before.holderIdentity ? 1 : 0) } : {}),
  };
}

/** The lease a leader leaves behind on a clean stop: no holder, so a candidate takes it at its next try. */
export function releasedLease(spec: V1LeaseSpec): V1LeaseSpec {
  return { ...spec, holderIdentity: '', leaseDurationSeconds: 1 };
}
