/** An exponential backoff: `baseMs` after the first failure, doubling, never past `maxMs`. */
export interface BackoffPolicy {
  /** Delay after the first failure. */
  baseMs: number;
  /** Ceiling of the delay. */
  maxMs: number;
}

/** base * 2^(failures-1), capped: with base 200 ms, 200 ms, 400 ms, 800 ms … max. */
export function backoffDelayMs(failures: number, policy: BackoffPolicy): number {
  if (failures <= 0) return 0;
  return Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(failures - 1, 30));
}
