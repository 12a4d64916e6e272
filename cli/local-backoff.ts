/** How long local mode waits before restarting a process that exited. */
export interface BackoffPolicy {
  /** The wait after the first exit. */
  initialMs: number;
  /** The wait never grows past this. */
  maxMs: number;
  /** A process that ran at least this long before exiting starts over at `initialMs`. */
  resetAfterMs: number;
}

/**
 * kubelet's CrashLoopBackOff (10 s doubling to 5 min, reset after 10 min of running) scaled to a
 * laptop: a replica killed once is back within a second, one that crashes at every start is
 * retried every 30 s instead of spinning a core.
 */
export const LOCAL_RESTART_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 30_000, resetAfterMs: 60_000 };

/** The restart waits of one supervised process: exponential, capped, reset by a long enough run. Pure. */
export class RestartBackoff {
  private failures = 0;

  constructor(private readonly policy: BackoffPolicy) {}

  /** The wait before the next start of a process that ran `ranMs` before it exited. */
  next(ranMs: number): number {
    if (ranMs >= this.policy.resetAfterMs) this.failures = 0;
    const ms = Math.min(this.policy.maxMs, this.policy.initialMs * 2 ** this.failures);
    // Past the cap the exponent no longer matters; bounding it keeps 2 ** n finite.
    if (ms < this.policy.maxMs) this.failures++;
    return ms;
  }
}
