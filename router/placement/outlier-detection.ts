/**
 * Outlier detection of one replica (Envoy's consecutive gateway failures, with its ejection
 * backoff): a replica that refuses connections, or fails `consecutiveFailures` tries in a row
 * (no response headers before the try timeout, a connection that breaks before an answer, a
 * 502 or 504 from something in between), leaves placement for an ejection period that doubles
 * with each ejection since the replica last answered, up to `maxEjectionMs`. Back from an
 * ejection it is on probation: its first failure ejects it again. Any answer (even a 503
 * overloaded: the replica is alive) clears both. Pure: the caller passes the time.
 */

export interface OutlierPolicy {
  /** Failed tries in a row that eject a replica. */
  consecutiveFailures: number;
  /** The first ejection's length; each further one doubles it. */
  ejectionMs: number;
  maxEjectionMs: number;
  /**
   * At most this share of a route's replicas is ejected at once (at least one), so that a pool
   * that is slow everywhere keeps serving from its replicas instead of ejecting them all.
   */
  maxEjectedPercent: number;
}

export const DEFAULT_OUTLIER_POLICY: OutlierPolicy = { consecutiveFailures: 3, ejectionMs: 2000, maxEjectionMs: 30_000, maxEjectedPercent: 50 };

/**
 * - answered: response headers came (whatever the status but 502 and 504).
 * - refused: the connection was refused or the host unreachable: nothing listens there.
 * - failed: the try timed out, its connection broke before an answer, or a gateway said 502/504.
 */
export type TryOutcome = 'answered' | 'refused' | 'failed';

/** How many of `replicas` may be ejected at once under `percent`: at least one. */
export function maxEjected(replicas: number, percent: number): number {
  return Math.max(1, Math.floor((replicas * percent) / 100));
}

export class OutlierState {
  private consecutive = 0;
  /** Ejections since the replica last answered: the exponent of the next ejection's length. */
  private ejections = 0;
  private probation = false;
  /** Out of placement until then. */
  ejectedUntil = 0;

  isEjected(now: number): boolean {
    return now < this.ejectedUntil;
  }

  /**
   * Records one try's outcome. Returns how long the replica is ejected for when this outcome
   * ejects it, else 0. `mayEject`: the route's cap on ejected replicas leaves room. A failure
   * reported while the replica is already ejected (a try sent before) changes nothing.
   */
  record(outcome: TryOutcome, now: number, policy: OutlierPolicy, mayEject: boolean): number {
    if (outcome === 'answered') {
      this.consecutive = 0;
      this.ejections = 0;
      this.probation = false;
      return 0;
    }
    if (this.isEjected(now)) return 0;
    this.consecutive++;
    const ejects = outcome === 'refused' || this.probation || this.consecutive >= policy.consecutiveFailures;
    if (!ejects || !mayEject) return 0;
    const ms = Math.min(policy.maxEjectionMs, policy.ejectionMs * 2 ** this.ejections);
    this.ejections++;
    this.consecutive = 0;
    this.probation = true;
    this.ejectedUntil = now + ms;
    return ms;
  }
}
