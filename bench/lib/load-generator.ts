import { Pool } from 'undici';
import { HEADER_RAY_MODEL_ID } from '../../common/names.js';
import { summarize, type LatencySummary } from './stats.js';

/**
 * The one load generator of the benchmarks, used unchanged against every system under test.
 *
 * Closed loop with fixed concurrency: `concurrency` workers each keep exactly one request in
 * flight and send the next as soon as the answer arrives. The model of each request is the next
 * id of one shared sequence (a seeded sampler), so every system sees the same model order.
 * Requests use the Ray Serve form both systems accept: `POST <url>` with the
 * `serve_multiplexed_model_id` header and a rows body `{"instances": [row, …]}`.
 */

export interface LoadOptions {
  /** e.g. `http://127.0.0.1:8000/wine/`. */
  url: string;
  /** The next model id to request; called once per request, in send order. */
  nextModel: () => string;
  concurrency: number;
  /** The run stops at whichever of these comes first. */
  durationMs: number;
  maxRequests: number;
  /** Request body, shared by every request. */
  body: string;
  /** Per-request deadline; a request past it counts as an error. */
  timeoutMs?: number;
}

export interface LoadResult {
  requests: number;
  ok: number;
  /** Non-2xx answers by status, and transport failures under `error`. */
  failures: Record<string, number>;
  /** The first failure's answer (or error), so a run that fails says why. */
  firstFailure?: string;
  elapsedMs: number;
  throughputRps: number;
  /** Over successful requests only. */
  latency: LatencySummary;
  /** The model ids in send order (for the ideal-LRU floor over the same sequence). */
  sequence: string[];
}

/** A run's failures for a progress line: counts by status, and the first one's answer. */
export function failureText(r: Pick<LoadResult, 'failures' | 'firstFailure'>): string {
  return `failures ${JSON.stringify(r.failures)}${r.firstFailure ? ` first: ${r.firstFailure}` : ''}`;
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const target = new URL(opts.url);
  const pool = new Pool(target.origin, { connections: opts.concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
  const path = target.pathname + target.search;
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  const sequence: string[] = [];
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const start = performance.now();
  const deadline = start + opts.durationMs;
  let sent = 0;
  let ok = 0;

  let firstFailure: string | undefined;
  const fail = (key: string, detail: string): void => {
    failures[key] = (failures[key] ?? 0) + 1;
    firstFailure ??= `${key}: ${detail.slice(0, 300)}`;
  };

  async function worker(): Promise<void> {
    while (sent < opts.maxRequests && performance.now() < deadline) {
      sent++;
      const model = opts.nextModel();
      sequence.push(model);
      const t0 = performance.now();
      try {
        const res = await pool.request({
          method: 'POST',
          path,
          headers: { 'content-type': 'application/json', [HEADER_RAY_MODEL_ID]: model },
          body: opts.body,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
        const text = await res.body.text();
        if (res.statusCode >= 200 && res.statusCode < 300) {
          ok++;
          latencies.push(performance.now() - t0);
        } else fail(String(res.statusCode), text);
      } catch (err) {
        fail((err as { code?: string }).code ?? 'error', String(err));
      }
    }
  }

  await Promise.all(Array.from({ length: opts.concurrency }, () => worker()));
  const elapsedMs = performance.now() - start;
  await pool.close();
  return { requests: sent, ok, failures, ...(firstFailure !== undefined ? { firstFailure } : {}), elapsedMs, throughputRps: (ok * 1000) / elapsedMs, latency: summarize(latencies), sequence };
}

/**
 * Every model in `ids` requested once, `concurrency` at a time: a pool's cold start (first
 * downloads and loads), paid before any measured window.
 */
export async function everyModelOnce(url: string, ids: readonly string[], concurrency: number, body: string): Promise<LoadResult> {
  let i = 0;
  return runLoad({ url, nextModel: () => ids[i++ % ids.length] as string, concurrency, body, maxRequests: ids.length, durationMs: 3_600_000 });
}
