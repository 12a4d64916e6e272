/** Injected time and randomness, so decisions can be replayed in tests. */
export interface Clock {
  /** Milliseconds, monotonic enough for timeouts and ages. */
  now(): number;
}

/** A source of uniform draws in [0, 1). */
export type Random = () => number;

export const systemClock: Clock = { now: () => performance.timeOrigin + performance.now() };
export const systemRandom: Random = Math.random;
