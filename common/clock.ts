/** Injected time and randomness, so decisions can be replayed in tests. */
export interface Clock {
  /** Milliseconds, monotonic enough for timeouts and ages. */
  now(): number;
}

/** A source of uniform draws in [0, 1). */
export type Random = () => number;

/** Read once: `performance.timeOrigin` is a getter, and the router reads the clock several times per request. */
const origin = performance.timeOrigin;
export const systemClock: Clock = { now: () => origin + performance.now() };
export const systemRandom: Random = Math.random;
