import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';

const execFileP = promisify(execFile);

/**
 * vegeta (github.com/tsenart/vegeta), a Go load generator, as bench:grpc's open-loop client. It
 * sends at a constant rate whatever the answers, each request from a goroutine of its own, so a
 * slow answer holds back no later send; over HTTP/1.1 it opens a connection for each request in
 * flight, over h2c it multiplexes streams on one connection, as a gRPC channel does. One client
 * for both protocols, in its own process with Go's concurrent collector: the benchmark process's
 * node:http2 clients had collection pauses of 10–40 ms in their windows, which landed in the
 * gRPC tail they measured (docs/adr/0055).
 */

/** The binary: `MODELMUX_BENCH_VEGETA`, or built into the cache by test/tools/install-vegeta.sh. */
export async function vegetaBinary(repoRoot: string): Promise<string> {
  const fixed = process.env['MODELMUX_BENCH_VEGETA'];
  if (fixed !== undefined && fixed !== '') return fixed;
  const { stdout } = await execFileP('bash', [join(repoRoot, 'test/tools/install-vegeta.sh')], { maxBuffer: 16 << 20 });
  const path = stdout.trim().split('\n').pop();
  if (path === undefined || path === '') throw new Error('test/tools/install-vegeta.sh printed no path');
  return path;
}

export interface VegetaTarget {
  url: string;
  headers: Readonly<Record<string, string>>;
  /** The request body, in a file vegeta reads once. */
  bodyFile: string;
}

/** vegeta's HTTP target format: a request line, its headers, `@body`, a blank line; vegeta takes them in turn. */
export function targetsText(targets: readonly VegetaTarget[]): string {
  return targets.map((t) => [`POST ${t.url}`, ...Object.entries(t.headers).map(([k, v]) => `${k}: ${v}`), `@${t.bodyFile}`, ''].join('\n')).join('\n');
}

const reportSchema = z.object({
  latencies: z.object({ '50th': z.number(), '90th': z.number(), '99th': z.number(), max: z.number(), mean: z.number() }),
  requests: z.number(),
  rate: z.number(),
  throughput: z.number(),
  duration: z.number(),
  wait: z.number(),
  status_codes: z.record(z.string(), z.number()),
  errors: z.array(z.string()).nullable(),
});

/** What a window's requests came to, times in ms. */
export interface VegetaSummary {
  requests: number;
  /** Sent per second, as vegeta paced them. */
  rate: number;
  /** Answered with 200 per second, from the first send to the last answer. */
  throughput: number;
  statusCodes: Record<string, number>;
  latency: { p50Ms: number; p90Ms: number; p99Ms: number; maxMs: number; meanMs: number };
  errors: string[];
}

/** `vegeta report -type=json`, whose times are in nanoseconds. */
export function parseReport(json: string): VegetaSummary {
  const r = reportSchema.parse(JSON.parse(json));
  const ms = (ns: number): number => ns / 1e6;
  return {
    requests: r.requests,
    rate: r.rate,
    throughput: r.throughput,
    statusCodes: r.status_codes,
    latency: { p50Ms: ms(r.latencies['50th']), p90Ms: ms(r.latencies['90th']), p99Ms: ms(r.latencies['99th']), maxMs: ms(r.latencies.max), meanMs: ms(r.latencies.mean) },
    errors: r.errors ?? [],
  };
}

export interface Attack {
  targetsFile: string;
  ratePerSecond: number;
  seconds: number;
  /** HTTP/2 without TLS (gRPC); otherwise HTTP/1.1. */
  h2c: boolean;
  /** Where vegeta writes its results (binary), for `report`. */
  out: string;
}

/** One window: every request sent and answered (or timed out after 10 s) when it resolves. */
export async function attack(bin: string, a: Attack): Promise<void> {
  await execFileP(bin, ['attack', `-targets=${a.targetsFile}`, `-rate=${a.ratePerSecond}/s`, `-duration=${a.seconds}s`, '-timeout=10s', a.h2c ? '-h2c' : '-http2=false', `-output=${a.out}`]);
}

/** The summary of one or more windows' results together (latency percentiles over all their requests). */
export async function report(bin: string, results: readonly string[]): Promise<VegetaSummary> {
  const { stdout } = await execFileP(bin, ['report', '-type=json', ...results], { maxBuffer: 16 << 20 });
  return parseReport(stdout);
}
