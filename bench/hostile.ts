import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { type OptionSpecs, intString } from '../common/config.js';
import { hiddenUnitsForBytes, SAMPLE_WINE } from '../common/wine-model.js';
import { REJECT_REASONS, TIMEOUT_PHASES } from '../router/metrics.js';
import { checkAnswer } from './lib/answer-check.js';
import { startChild, type Child } from './lib/child.js';
import { GrpcHostileClients, type GrpcHostileMix } from './lib/grpc-hostile-clients.js';
import { HostileClients, type HostileMix, type HostileReport } from './lib/hostile-clients.js';
import { failureText, runLoad, type LoadResult } from './lib/load-generator.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { ensureModelFiles, modelDirFor } from './lib/model-set.js';
import { startModelmuxLocal } from './lib/modelmux-local.js';
import { sumMetric } from './lib/prom-text.js';
import { median } from './lib/stats.js';
import { modelIds } from './lib/traffic.js';
import { writeReport, type BenchReport } from './lib/report.js';

/**
 * `npm run bench:hostile`: does good traffic keep its latency while hostile clients run beside
 * it? One `modelmux local` pool with the router's default limits and timeouts; the same
 * closed-loop good traffic measured alone and with a hostile mix running in a process of its own
 * (stalled bodies and heads, slow readers of large answers, nesting bombs, idle connections; on
 * the gRPC port: stalled messages, window-1 readers, rapid resets, decode bombs, idle connections),
 * windows taking turns; the good traffic's p99 and errors with and without, and their ratio.
 * Not part of any test run. Writes bench/results/hostile.{json,md}.
 */

/** Hostile clients connect from these, never from 127.0.0.1, the good clients' address. */
const HOSTILE_ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
/** The rapid-reset client's own address: the router cuts off an address over its reset budget, which would cut the rest of the mix too. */
const RESETTER_ADDRESS = '127.0.0.6';

const schema = z.object({
  replicas: intString(1, 64).default(2),
  models: intString(1, 1000).default(8),
  modelBytes: intString(0, 1_000_000_000).default(0),
  maxOngoingRequests: intString(1, 100_000).default(16),
  concurrency: intString(1, 1024).default(8),
  durationSeconds: z.coerce.number().min(1).max(3600).default(10),
  warmupSeconds: z.coerce.number().min(0).max(600).default(5),
  settleSeconds: z.coerce.number().min(0).max(600).default(2),
  rounds: intString(1, 100).default(2),
  stalledBodies: intString(0, 100_000).default(64),
  stalledHeads: intString(0, 100_000).default(32),
  slowReaders: intString(0, 100_000).default(16),
  slowReaderRows: intString(1, 100_000).default(5000),
  slowReaderHoldMs: intString(1, 600_000).default(2000),
  bombsPerSecond: z.coerce.number().min(0).max(10_000).default(20),
  idleConnections: intString(0, 100_000).default(256),
  grpcStalledConnections: intString(0, 100_000).default(8),
  grpcStalledCalls: intString(1, 1000).default(16),
  grpcWindowOneReaders: intString(0, 100_000).default(16),
  grpcResetsPerSecond: intString(0, 100_000).default(1000),
  grpcBombsPerSecond: z.coerce.number().min(0).max(1000).default(2),
  grpcIdleConnections: intString(0, 100_000).default(64),
  child: z.string().optional(),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  replicas: { flag: 'replicas', help: 'Replica processes of the pool (default 2).' },
  models: { flag: 'models', help: 'Models the good traffic asks for in turn, all of them loaded (default 8).' },
  modelBytes: { flag: 'model-bytes', help: 'Size of each model; 0 = the small example size (default 0).' },
  maxOngoingRequests: { flag: 'max-ongoing-requests', help: 'Requests per replica (default 16).' },
  concurrency: { flag: 'concurrency', help: 'Closed-loop good clients (default 8).' },
  durationSeconds: { flag: 'duration-seconds', help: 'Measured seconds per window (default 10).' },
  warmupSeconds: { flag: 'warmup-seconds', help: 'Unmeasured seconds of good traffic first (default 5).' },
  settleSeconds: { flag: 'settle-seconds', help: 'Seconds the hostile mix runs before a window with it is measured (default 2).' },
  rounds: { flag: 'rounds', help: 'Rounds of one window alone and one with the hostile mix (default 2).' },
  stalledBodies: { flag: 'stalled-bodies', help: 'Connections whose body stops short, half with a Content-Length, half chunked (default 64).' },
  stalledHeads: { flag: 'stalled-heads', help: 'Connections whose request head stops halfway (default 32).' },
  slowReaders: { flag: 'slow-readers', help: 'Clients that send a large request and never read the answer (default 16).' },
  slowReaderRows: { flag: 'slow-reader-rows', help: "Rows in a slow reader's request (default 5000)." },
  slowReaderHoldMs: { flag: 'slow-reader-hold-ms', help: 'How long a slow reader keeps its connection before it starts again (default 2000).' },
  bombsPerSecond: { flag: 'bombs-per-second', help: 'Rows bodies of 30 nested arrays sent per second (default 20).' },
  idleConnections: { flag: 'idle-connections', help: 'Connections that send nothing (default 256).' },
  grpcStalledConnections: { flag: 'grpc-stalled-connections', help: 'HTTP/2 connections holding calls whose message stops halfway (1 MiB announced, 512 KiB sent) (default 8).' },
  grpcStalledCalls: { flag: 'grpc-stalled-calls', help: 'Calls per stalled HTTP/2 connection (default 16).' },
  grpcWindowOneReaders: { flag: 'grpc-window-one-readers', help: 'gRPC clients with a window of 1, never opened, asking for a large answer (slow-reader rows) (default 16).' },
  grpcResetsPerSecond: { flag: 'grpc-resets-per-second', help: `gRPC calls opened and reset at once per second by one client from ${RESETTER_ADDRESS} (rapid reset; default 1000).` },
  grpcBombsPerSecond: { flag: 'grpc-bombs-per-second', help: 'gRPC messages of two million empty inputs (4 MiB) sent per second (default 2).' },
  grpcIdleConnections: { flag: 'grpc-idle-connections', help: 'HTTP/2 connections that open no call (default 64).' },
  child: { flag: 'child', help: 'Internal: run the hostile mix described by this JSON until SIGTERM, then print what it got.' },
};

interface ChildSpec {
  port: number;
  path: string;
  model: string;
  mix: HostileMix;
  grpcAddress: string;
  grpcMix: GrpcHostileMix;
}

/** In the child: the mix runs until SIGTERM, then its report is the last line printed. */
function runChild(spec: ChildSpec): void {
  const clients = new HostileClients(spec.port, spec.path, spec.model, spec.mix, HOSTILE_ADDRESSES);
  const grpc = new GrpcHostileClients(spec.grpcAddress, spec.model, spec.grpcMix, HOSTILE_ADDRESSES, RESETTER_ADDRESS);
  clients.start();
  grpc.start();
  process.stdout.write('hostile clients started\n');
  process.once('SIGTERM', () => {
    const http = clients.stop();
    const h2 = grpc.stop();
    const report: HostileReport<string> = { connections: { ...http.connections, ...h2.connections }, answers: { ...http.answers, ...h2.answers } };
    process.stdout.write(`${JSON.stringify(report)}\n`);
    process.exit(0);
  });
}

interface Window {
  round: number;
  hostile: boolean;
  result: Omit<LoadResult, 'sequence'>;
  /** What the hostile clients got during the window and its settling time. */
  hostileReport?: HostileReport;
}

/** The router's timeouts by phase and refusals by reason, from its /metrics. */
function routerCounters(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const phase of TIMEOUT_PHASES) out.set(`modelmux_router_timeouts_total{phase="${phase}"}`, sumMetric(text, 'modelmux_router_timeouts_total', { phase }));
  for (const reason of REJECT_REASONS) out.set(`modelmux_router_rejected_connections_total{reason="${reason}"}`, sumMetric(text, 'modelmux_router_rejected_connections_total', { reason }));
  return out;
}

function errors(r: Omit<LoadResult, 'sequence'>): number {
  return r.requests - r.ok;
}

function report(o: Options, windows: readonly Window[], routerMetrics: Map<string, number>): BenchReport {
  const alone = windows.filter((w) => !w.hostile);
  const mixed = windows.filter((w) => w.hostile);
  const p99 = (ws: readonly Window[]): number => median(ws.map((w) => w.result.latency.p99Ms));
  const ratio = p99(mixed) / p99(alone);
  const rows = windows.map((w) => [
    String(w.round + 1),
    w.hostile ? 'with the hostile mix' : 'alone',
    fmt(w.result.throughputRps, 0),
    fmt(w.result.latency.p50Ms, 2),
    fmt(w.result.latency.p99Ms, 2),
    fmt(w.result.latency.maxMs, 1),
    `${errors(w.result)}${errors(w.result) > 0 ? ` ${JSON.stringify(w.result.failures)}` : ''}`,
  ]);
  const answers = new Map<string, number>();
  for (const w of mixed) for (const [k, v] of Object.entries(w.hostileReport?.answers ?? {})) answers.set(k, (answers.get(k) ?? 0) + v);
  const router = [...routerMetrics].filter(([, v]) => v !== 0);
  return {
    title: 'Good traffic beside hostile clients',
    setup:
      `\`modelmux local\` with ${o.replicas} replicas, ${o.models} models of ${o.modelBytes === 0 ? 'the small example size' : `${(o.modelBytes / 1e6).toFixed(1)} MB`} all loaded, ` +
      `\`--max-ongoing-requests ${o.maxOngoingRequests}\`, the router's default limits and timeouts. Good traffic: ${o.concurrency} closed-loop clients from 127.0.0.1, one row per request in the Ray Serve form, ` +
      `models in turn, ${o.durationSeconds} s per window after ${o.warmupSeconds} s unmeasured; ${o.rounds} rounds of a window alone and a window with the hostile mix, which starts ${o.settleSeconds} s before its window and stops after it. ` +
      `Hostile mix, in a process of its own, from ${HOSTILE_ADDRESSES.join(', ')}: ${o.stalledBodies} bodies that stop short (half Content-Length: 1 MiB with 512 KiB sent, half chunked without a last chunk), ` +
      `${o.stalledHeads} heads that stop halfway, ${o.slowReaders} slow readers (${o.slowReaderRows} rows each, never reading the answer, starting again after ${o.slowReaderHoldMs} ms), ` +
      `${o.bombsPerSecond} bodies of 30 nested arrays per second, ${o.idleConnections} idle connections; ` +
      `and on the router's gRPC port (HTTP/2): ${o.grpcStalledConnections} connections of ${o.grpcStalledCalls} calls whose message stops halfway (1 MiB announced, 512 KiB sent), ` +
      `${o.grpcWindowOneReaders} clients with a window of 1 never opened asking for ${o.slowReaderRows} rows, one client from ${RESETTER_ADDRESS} opening and resetting ${o.grpcResetsPerSecond} calls a second (rapid reset), ` +
      `${o.grpcBombsPerSecond} messages of two million empty inputs (4 MiB) per second, ${o.grpcIdleConnections} idle connections; each client connects again when the router closes it.`,
    sections: [
      {
        headline: true,
        table: { header: ['round', 'good traffic', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'errors'], rows },
        after:
          `**p99 with the hostile mix / alone: ${fmt(ratio, 2)}** (medians of the windows' p99: ${fmt(p99(mixed), 2)} ms / ${fmt(p99(alone), 2)} ms; target ≤ 1.5: ${ratio <= 1.5 ? 'met' : '**missed**'}); ` +
          `errors of the good traffic: ${alone.reduce((n, w) => n + errors(w.result), 0)} alone, ${mixed.reduce((n, w) => n + errors(w.result), 0)} with the mix.`,
      },
      {
        text: `What the hostile clients got (connections closed, by kind and status; \`closed\`: no answer): ${
          [...answers]
            .sort()
            .map(([k, v]) => `${k}: ${v}`)
            .join(', ') || 'nothing'
        }.`,
        after: `The router's counters at the end: ${router.map(([k, v]) => `\`${k}\` ${v}`).join(', ') || 'none'}.`,
      },
    ],
    data: { windows, ratio, routerMetrics: Object.fromEntries(routerMetrics) },
  };
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  if (o.child !== undefined) return runChild(JSON.parse(o.child) as ChildSpec);
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  const log = (msg: string): void => void process.stderr.write(`[bench:hostile ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  const ids = modelIds(o.models);
  const dir = modelDirFor(o.modelBytes);
  await ensureModelFiles(dir, ids, o.modelBytes);
  log(`starting modelmux local: ${o.replicas} replicas`);
  const pool = await startModelmuxLocal(repoRoot, {
    port: 0,
    replicas: o.replicas,
    maxModelsPerReplica: o.models,
    maxOngoingRequests: o.maxOngoingRequests,
    maxBatchSize: 1,
    batchWaitMs: 0,
    modelSource: `file://${dir}`,
  });
  const windows: Window[] = [];
  let routerMetrics: Map<string, number>;
  let hostile: Child | undefined;
  try {
    const target = new URL(pool.url);
    for (const id of ids) await checkAnswer(pool.url, id, hiddenUnitsForBytes(o.modelBytes === 0 ? undefined : o.modelBytes));
    const body = JSON.stringify({ instances: [SAMPLE_WINE] });
    let turn = 0;
    const good = (durationMs: number): Promise<LoadResult> =>
      runLoad({ url: pool.url, nextModel: () => ids[turn++ % ids.length] as string, concurrency: o.concurrency, body, durationMs, maxRequests: Number.MAX_SAFE_INTEGER });
    if (o.warmupSeconds > 0) await good(o.warmupSeconds * 1000);
    if (pool.grpcAddress === undefined) throw new Error('modelmux local printed no gRPC address');
    const spec: ChildSpec = {
      grpcAddress: pool.grpcAddress,
      grpcMix: {
        stalledMessages: o.grpcStalledConnections,
        stalledCallsPerConnection: o.grpcStalledCalls,
        windowOneReaders: o.grpcWindowOneReaders,
        windowOneRows: o.slowReaderRows,
        resetsPerSecond: o.grpcResetsPerSecond,
        bombsPerSecond: o.grpcBombsPerSecond,
        idleConnections: o.grpcIdleConnections,
      },
      port: Number(target.port),
      path: target.pathname,
      model: ids[0] as string,
      mix: {
        stalledBodies: o.stalledBodies,
        stalledHeads: o.stalledHeads,
        slowReaders: o.slowReaders,
        slowReaderRows: o.slowReaderRows,
        slowReaderHoldMs: o.slowReaderHoldMs,
        bombsPerSecond: o.bombsPerSecond,
        idleConnections: o.idleConnections,
      },
    };
    const script = fileURLToPath(import.meta.url);
    for (let round = 0; round < o.rounds; round++) {
      const { sequence: _a, ...alone } = await good(o.durationSeconds * 1000);
      windows.push({ round, hostile: false, result: alone });
      log(`round ${round + 1} alone: p99 ${alone.latency.p99Ms.toFixed(2)} ms, ${alone.throughputRps.toFixed(0)} req/s, ${failureText(alone)}`);
      hostile = await startChild(process.execPath, [script, '--child', JSON.stringify(spec)], { ready: /hostile clients started/, readyTimeoutMs: 30_000 });
      await new Promise((r) => setTimeout(r, o.settleSeconds * 1000));
      const { sequence: _b, ...mixed } = await good(o.durationSeconds * 1000);
      await hostile.stop(10_000);
      const last = hostile.output().trim().split('\n').pop() ?? '{}';
      hostile = undefined;
      windows.push({ round, hostile: true, result: mixed, hostileReport: JSON.parse(last) as HostileReport });
      log(`round ${round + 1} with the hostile mix: p99 ${mixed.latency.p99Ms.toFixed(2)} ms, ${mixed.throughputRps.toFixed(0)} req/s, ${failureText(mixed)}`);
    }
    routerMetrics = routerCounters(await (await fetch(`${pool.adminUrl}/metrics`)).text());
  } finally {
    await hostile?.stop(10_000);
    await pool.stop();
  }
  await writeReport(run, report(o, windows, routerMetrics));
}

await runBench({ name: 'hostile', summary: 'Good traffic alone and beside hostile clients.', schema, specs }, main);
