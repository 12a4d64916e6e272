import { Pool } from 'undici';
import { HEADER_RAY_MODEL_ID } from '../../common/names.js';
import { exponential } from '../simulator/rng.js';
import { summarize, type LatencySummary } from './stats.js';

/**
 * The open-loop load generator of bench:mux. Requests arrive as a Poisson process at a fixed
 * rate whatever the system answers, and each latency runs from the request's intended start (its
 * place in the schedule), not from when it was sent: a system that stalls is charged for every
 * request that waited behind the stall, which a closed loop hides (coordinated omission).
 *
 * The schedule and the verdicts are pure functions below; `runStep` is the only I/O.
 */

/** Arrival times in ms from the step's start: exponential gaps of mean 1000 / rate, drawn from `random` (uniform [0,1)). */
export function poissonArrivals(ratePerSecond: number, durationMs: number, random: () => number): number[] {
  if (!(ratePerSecond > 0) || !(durationMs > 0)) return [];
  const meanGapMs = 1000 / ratePerSecond;
  const out: number[] = [];
  for (let t = exponential(random, meanGapMs); t < durationMs; t += exponential(random, meanGapMs)) out.push(t);
  return out;
}

/** The rates a step-up visits: `start`, then each `factor` times the previous, rounded, up to `max`. */
export function rateLadder(start: number, factor: number, max: number): number[] {
  if (!(start > 0) || !(factor > 1)) throw new Error('rateLadder: start must be > 0 and factor > 1');
  const out: number[] = [];
  for (let r = start; Math.round(r) <= max; r *= factor) out.push(Math.round(r));
  return out;
}

/** What the verdict needs of one measured step. */
export interface StepVerdictInput {
  requests: number;
  ok: number;
  p99Ms: number;
}

/** A step is sustained when every request succeeded and the p99 from intended start is within the limit. */
export function sustained(step: StepVerdictInput, p99LimitMs: number): boolean {
  return step.requests > 0 && step.ok === step.requests && step.p99Ms <= p99LimitMs;
}

/**
 * Failed or late requests past which a step cannot be sustained any more: more than 1% of the
 * planned requests late means the p99 is over the limit, so the step stops there.
 */
export function lateBudget(plannedRequests: number): number {
  return Math.floor(plannedRequests / 100);
}

/** The highest rate of a step-up that was sustained (the step-up stops at its first failure); 0 if none. */
export function sustainableRate(steps: readonly { rateRps: number; sustained: boolean }[]): number {
  let best = 0;
  for (const s of steps) {
    if (!s.sustained) break;
    best = Math.max(best, s.rateRps);
  }
  return best;
}

export interface StepOptions {
  /** e.g. `http://127.0.0.1:8000/wine/`; with several (a pool's routers), requests take them in turn. */
  urls: readonly string[];
  rateRps: number;
  /** Unmeasured seconds at the same rate first (the same schedule continues into the measured part). */
  warmupMs: number;
  measuredMs: number;
  p99LimitMs: number;
  random: () => number;
  nextModel: () => string;
  body: string;
  /** A request unanswered this long after its intended start is an error. */
  timeoutMs: number;
  connections: number;
}

export interface StepResult {
  rateRps: number;
  /** Measured requests: intended start inside the measured part. */
  requests: number;
  ok: number;
  failures: Record<string, number>;
  firstFailure?: string;
  /** Over successful measured requests, from intended start. */
  latency: LatencySummary;
  sustained: boolean;
  /** The step stopped early: more late or failed requests than a sustained p99 allows. */
  stoppedEarly: boolean;
  /** How late the generator itself sent requests (ms after intended start): it must keep up for the numbers to hold. */
  sendLagP99Ms: number;
  /** Every model id sent, in order (warm-up included), for the ideal-LRU floor. */
  sequence: string[];
}

/** One step of the step-up: Poisson arrivals at `rateRps` for warm-up + measured time. */
export async function runStep(o: StepOptions): Promise<StepResult> {
  const targets = o.urls.map((u) => {
    const url = new URL(u);
    return { pool: new Pool(url.origin, { connections: o.connections, pipelining: 1, keepAliveTimeout: 30_000 }), path: url.pathname + url.search };
  });
  const arrivals = poissonArrivals(o.rateRps, o.warmupMs + o.measuredMs, o.random);
  const planned = arrivals.filter((t) => t >= o.warmupMs).length;
  const budget = lateBudget(planned);
  const latencies: number[] = [];
  const lags: number[] = [];
  const failures: Record<string, number> = {};
  const sequence: string[] = [];
  let firstFailure: string | undefined;
  let requests = 0;
  let ok = 0;
  let late = 0;
  let stop = false;
  const inFlight = new Set<Promise<void>>();
  const fail = (key: string, detail: string): void => {
    failures[key] = (failures[key] ?? 0) + 1;
    firstFailure ??= `${key}: ${detail.slice(0, 300)}`;
  };

  const send = async (intended: number, measured: boolean, model: string, n: number): Promise<void> => {
    const { pool, path } = targets[n % targets.length] as (typeof targets)[number];
    try {
      const res = await pool.request({
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json', [HEADER_RAY_MODEL_ID]: model },
        body: o.body,
        headersTimeout: o.timeoutMs,
        bodyTimeout: o.timeoutMs,
      });
      const text = await res.body.text();
      const ms = performance.now() - intended;
      if (!measured) return;
      if (res.statusCode >= 200 && res.statusCode < 300) {
        ok++;
        latencies.push(ms);
        if (ms > o.p99LimitMs) late++;
      } else {
        fail(String(res.statusCode), text);
        late++;
      }
    } catch (err) {
      if (!measured || stop) return;
      fail((err as { code?: string }).code ?? 'error', String(err));
      late++;
    }
    if (late > budget) stop = true;
  };

  const start = performance.now();
  let i = 0;
  while (i < arrivals.length && !stop) {
    const now = performance.now() - start;
    // Everything due by now goes out in this turn; the generator's own lateness is recorded.
    while (i < arrivals.length && (arrivals[i] as number) <= now) {
      const at = arrivals[i++] as number;
      const measured = at >= o.warmupMs;
      const model = o.nextModel();
      sequence.push(model);
      if (measured) {
        requests++;
        lags.push(now - at);
      }
      const p = send(start + at, measured, model, i);
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
    const next = arrivals[i];
    if (next !== undefined) await new Promise((r) => setTimeout(r, Math.max(0, next - (performance.now() - start))));
  }
  if (stop) {
    // The verdict is in: what is still in flight is cut off rather than waited for.
    await Promise.all(targets.map((t) => t.pool.destroy()));
  } else {
    await Promise.all(inFlight);
    await Promise.all(targets.map((t) => t.pool.close()));
  }
  const latency = summarize(latencies);
  const step = { requests: stop ? planned : requests, ok, p99Ms: latency.p99Ms };
  return {
    rateRps: o.rateRps,
    requests: step.requests,
    ok,
    failures,
    ...(firstFailure !== undefined ? { firstFailure } : {}),
    latency,
    sustained: !stop && sustained(step, o.p99LimitMs),
    stoppedEarly: stop,
    sendLagP99Ms: summarize(lags).p99Ms,
    sequence,
  };
}
