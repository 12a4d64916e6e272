import { seededRandom } from '../simulator/rng.js';
import { paceArrivals, poissonArrivals } from './open-loop.js';
import type { Send } from './raw-grpc-senders.js';
import { summarize, type LatencySummary } from './stats.js';

/**
 * bench:grpc's open-loop windows: both protocols offered the same Poisson arrivals, below
 * saturation, each latency from the request's intended start (open-loop.ts' generator). A closed
 * loop saturates a small machine, so its p99 weighs the clients' CPU and the queue they fill, and
 * it sends nothing while a request stalls (coordinated omission): a latency target is judged at
 * an equal offered load instead.
 */

/**
 * The share of the lower closed-loop rate offered by default: well below saturation for both
 * protocols, on any machine. At half, on two cores shared with the clients, the generator itself
 * sent up to 11 ms late at p99 and its own lag weighed on the latencies it measured.
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

/** A second of arrivals may be in flight, and never fewer than this many. */
export const MIN_IN_FLIGHT = 64;

/**
 * Requests a window lets be in flight at once: a second of arrivals at `ratePerSecond`, far more
 * than a window below saturation holds (rate × latency), while a stall of a second or more drops
 * the arrivals past it (counted) instead of piling up streams and memory without bound.
 */
export function inFlightCap(ratePerSecond: number): number {
  return Math.max(MIN_IN_FLIGHT, Math.ceil(ratePerSecond));
}

/** The highest p99 among `protocol`'s windows: a target holds only if it holds in the worst one. */
export function worstP99Ms(windows: readonly { protocol: string; latency: { p99Ms: number } }[], protocol: string): number {
  return Math.max(...windows.filter((w) => w.protocol === protocol).map((w) => w.latency.p99Ms));
}

export interface OfferedLoadOptions {
  /** Taken in turn, one per arrival (HTTP/2 sessions multiplex, an undici pool queues). */
  sends: readonly Send[];
  /** Taken in turn, one per arrival. */
  ids: readonly string[];
  rateRps: number;
  durationMs: number;
  /** Seeds the arrivals: the same seed gives both protocols the same schedule. */
  seed: number;
  /** Requests in flight past which an arrival is dropped (inFlightCap). */
  cap: number;
}

export interface OfferedLoadResult {
  offeredRps: number;
  /** Arrivals in the window, each sent or dropped. */
  requests: number;
  ok: number;
  errors: number;
  /** Arrivals not sent because `cap` requests were in flight: a stall's toll, counted rather than skipped. */
  dropped: number;
  firstFailure?: string;
  /** From the window's start to its last answer. */
  seconds: number;
  /** Of the successful requests, each from its intended start. */
  latency: LatencySummary;
  /** How late the generator sent (ms after the intended start): the latencies hold while it keeps up. */
  sendLagP99Ms: number;
}

/**
 * One open-loop window: Poisson arrivals at `rateRps` for `durationMs`, then every request in
 * flight answered. `samplesMs` are the answered requests' latencies, for a percentile over
 * several windows.
 */
export async function offeredLoadWindow(o: OfferedLoadOptions): Promise<OfferedLoadResult & { samplesMs: number[] }> {
  const arrivals = poissonArrivals(o.rateRps, o.durationMs, seededRandom(o.seed));
  const latencies: number[] = [];
  const lags: number[] = [];
  const inFlight = new Set<Promise<void>>();
  let ok = 0;
  let errors = 0;
  let dropped = 0;
  let firstFailure: string | undefined;
  const start = performance.now();
  await paceArrivals(arrivals, start, (at, now, index) => {
    lags.push(now - at);
    if (inFlight.size >= o.cap) {
      dropped++;
      return;
    }
    const send = o.sends[index % o.sends.length] as Send;
    const p = send(o.ids[index % o.ids.length] as string).then(
      () => {
        ok++;
        latencies.push(performance.now() - (start + at));
      },
      (err: unknown) => {
        errors++;
        firstFailure ??= err instanceof Error ? err.message : String(err);
      },
    );
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  });
  await Promise.all(inFlight);
  return {
    offeredRps: o.rateRps,
    requests: arrivals.length,
    ok,
    errors,
    dropped,
    ...(firstFailure !== undefined ? { firstFailure } : {}),
    seconds: (performance.now() - start) / 1000,
    latency: summarize(latencies),
    sendLagP99Ms: summarize(lags).p99Ms,
    samplesMs: latencies,
  };
}
