/**
 * bench:grpc's open-loop windows (lib/vegeta.ts): both protocols offered the same constant rate,
 * below saturation. A closed loop saturates a small machine, so its p99 weighs the clients' CPU
 * and the queue they fill, and it sends nothing while a request stalls (coordinated omission): a
 * latency target is judged at an equal offered load instead.
 */

/**
 * The share of the lower closed-loop rate offered by default: well below saturation for both
 * protocols, on any machine, with the router, the replicas and the client on the same cores.
 */
export const DEFAULT_RATE_FRACTION = 0.25;

/** What the default rate needs of a closed-loop window. */
export interface ClosedLoopRate {
  protocol: string;
  ok: number;
  seconds: number;
}

/**
 * The default offered rate in req/s: `fraction` of the lower of the protocols' closed-loop rates
 * (each over all its windows), whole and at least 1; 0 when a protocol answered nothing, since
 * then there is no saturation to stay below.
 */
export function defaultOfferedRate(windows: readonly ClosedLoopRate[], fraction = DEFAULT_RATE_FRACTION): number {
  const protocols = [...new Set(windows.map((w) => w.protocol))];
  const rates = protocols.map((p) => {
    const of = windows.filter((w) => w.protocol === p);
    const seconds = of.reduce((s, w) => s + w.seconds, 0);
    return seconds > 0 ? of.reduce((s, w) => s + w.ok, 0) / seconds : 0;
  });
  const lowest = Math.min(...rates);
  return rates.length === 0 || !(lowest > 0) ? 0 : Math.max(1, Math.round(lowest * fraction));
}

/** The highest p99 among `protocol`'s windows: a target holds only if it holds in the worst one. */
export function worstP99Ms(windows: readonly { protocol: string; latency: { p99Ms: number } }[], protocol: string): number {
  return Math.max(...windows.filter((w) => w.protocol === protocol).map((w) => w.latency.p99Ms));
}
