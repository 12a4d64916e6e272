/**
 * The adaptive try timeout: how long a try at a replica that holds its model may wait for
 * response headers before the router gives up on that replica and tries another. A multiple
 * of what the pool answers in lately, so that a hung replica is left within about a second
 * where a flat timeout would hold the request for its full length; bounded below, so that a
 * fast model's jitter (a GC pause, a batch wait) is not taken for a hang, and above by the
 * flat cap. It only ever moves a request elsewhere: a try that may not be retried (per-request
 * limit, retry budget, no other replica) keeps waiting up to the cap (exchange.ts).
 */

export interface TryTimeoutPolicy {
  /** Never below this (ms). */
  floorMs: number;
  /** Times the recent 99th percentile latency. */
  multiple: number;
  /** Never above this (ms): --try-timeout-ms, also the timeout when nothing is known. */
  capMs: number;
}

/** Tries of a model (or, failing that, of the route) seen lately before their p99 is trusted. */
export const MIN_SAMPLES = 20;

/** `p99`: the recent 99th percentile (ms) from LatencyWindows, undefined when too few tries are known. */
export function adaptiveTryTimeoutMs(p99: number | undefined, policy: TryTimeoutPolicy): number {
  if (p99 === undefined) return policy.capMs;
  return Math.min(policy.capMs, Math.max(policy.floorMs, Math.ceil(policy.multiple * p99)));
}
