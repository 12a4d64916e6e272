import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Client, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { Pool } from 'undici';
import { z } from 'zod';
import { type OptionSpecs, intString } from '../common/config.js';
import { inferenceClient } from '../common/grpc/inference-service.js';
import { hiddenUnitsForBytes, SAMPLE_WINE, WINE_FEATURES, WINE_INPUT, wineForward, wineWeights } from '../common/wine-model.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { ensureModelFiles, modelDirFor } from './lib/model-set.js';
import { startModelmuxLocal, type ModelmuxLocal } from './lib/modelmux-local.js';
import { totalCpuSeconds } from './lib/proc-cpu.js';
import { DEFAULT_RATE_FRACTION, defaultOfferedRate, worstP99Ms } from './lib/offered-load.js';
import { readMetric, sumMetric } from './lib/prom-text.js';
import { attack, report as vegetaReport, targetsText, vegetaBinary, type VegetaSummary } from './lib/vegeta.js';
import { writeReport, type BenchReport, type ReportSection } from './lib/report.js';
import { summarize, type LatencySummary } from './lib/stats.js';
import { modelIds } from './lib/traffic.js';
import { clientPauses } from './lib/gc-pauses.js';
import { inferMessages, rawGrpcSenders, type Send } from './lib/raw-grpc-senders.js';

/**
 * `npm run bench:grpc`: the Open Inference Protocol's HTTP/JSON and gRPC forms through the same
 * router to the same replicas, the same models and the same number of closed-loop clients: what
 * each costs the router and the replicas per request (requests per CPU-second from /proc), and
 * its p50 and p99; then the latency of both at an equal offered load below saturation, sent by
 * vegeta (open loop, lib/vegeta.ts). HTTP: `POST /<route>/v2/models/<id>/infer` with a JSON body, one keep-alive
 * undici connection per client. gRPC: ModelInfer with the rows in `fp32_contents`, one HTTP/2 connection
 * per client: by default a lean client on the project's own HTTP/2 framing (lib/raw-grpc-senders.ts),
 * as lean as the HTTP one, so that the clients' CPU and collections on the same cores weigh on
 * both alike; `--grpc-client node-http2` for node:http2's client, `grpc-js` for grpc-js channels,
 * what most gRPC users run. The benchmark process's own CPU per request and its collection pauses
 * are reported beside the router's and the replicas'. Not part of any test run. Writes
 * bench/results/grpc.{json,md}.
 */

const schema = z.object({
  replicas: intString(1, 64).default(2),
  models: intString(1, 1000).default(8),
  concurrency: intString(1, 1024).default(8),
  rows: intString(1, 10_000).default(1),
  durationSeconds: z.coerce.number().min(1).max(3600).default(10),
  warmupSeconds: z.coerce.number().min(0).max(600).default(3),
  rounds: intString(1, 20).default(1),
  grpcClient: z.enum(['frames', 'node-http2', 'grpc-js']).default('frames'),
  rate: z.coerce.number().min(0).max(1_000_000).optional(),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  replicas: { flag: 'replicas', help: 'Replica processes of the pool (default 2).' },
  models: { flag: 'models', help: 'Models the clients ask for in turn, all of them loaded (default 8).' },
  concurrency: { flag: 'concurrency', help: 'Closed-loop clients of each protocol (default 8).' },
  rows: { flag: 'rows', help: 'Rows of 11 features per request (default 1).' },
  durationSeconds: { flag: 'duration-seconds', help: 'Measured seconds per protocol and round (default 10).' },
  warmupSeconds: { flag: 'warmup-seconds', help: 'Unmeasured seconds of each protocol before the first round (default 3).' },
  rounds: { flag: 'rounds', help: 'Rounds of one window per protocol, the order alternating (default 1).' },
  grpcClient: {
    flag: 'grpc-client',
    help: "gRPC clients, one connection each, messages encoded once: frames (the project's HTTP/2 framing, as lean as the HTTP clients), node-http2 (node:http2's client session) or grpc-js (one channel each) (default frames).",
  },
  rate: {
    flag: 'rate',
    help: `Requests per second vegeta offers each protocol, at a constant rate, in the open-loop windows after the closed-loop ones (default: ${DEFAULT_RATE_FRACTION * 100}% of the lower closed-loop req/s of the run; 0: no open-loop windows).`,
  },
};

type Protocol = 'http' | 'grpc';

interface CpuUse {
  routerCpuSeconds: number;
  replicaCpuSeconds: number;
  /** The benchmark process's, where the clients run. */
  benchCpuSeconds: number;
}

/**
 * Collection pauses across a closed-loop window: the benchmark process's, which every client
 * waits out, and the router's and the replicas' (from their /metrics; undefined where a process
 * does not export them), which every request they hold waits out.
 */
interface Pauses {
  clientGcMs: number;
  clientGcMaxMs: number;
  routerGcMs: number | undefined;
  replicaGcMs: number | undefined;
}

interface Window extends CpuUse, Pauses {
  protocol: Protocol;
  round: number;
  requests: number;
  ok: number;
  firstFailure?: string;
  seconds: number;
  latency: LatencySummary;
}

/** An open-loop window: vegeta offered the protocol the same constant rate as the other. */
interface OpenWindow extends CpuUse {
  protocol: Protocol;
  round: number;
  offeredRps: number;
  summary: VegetaSummary;
  /** Requests not answered OK: another status than 200, or for gRPC a 200 the router did not count as OK (its grpc-status). */
  errors: number;
}

function rowsOf(n: number): number[][] {
  return Array.from({ length: n }, () => [...SAMPLE_WINE]);
}

/** The V2 JSON request body of `rows` sample rows. */
const httpBody = (rows: number): string => JSON.stringify({ inputs: [{ name: WINE_INPUT, shape: [rows, WINE_FEATURES], datatype: 'FP32', data: rowsOf(rows).flat() }] });

/**
 * The HTTP clients: one undici keep-alive connection each, through `dispatch`, undici's own API
 * under `request`, which hands the answer's chunks to a handler without a body stream: less of
 * the bench process's CPU per request than `request` takes, as lean as the gRPC frames clients
 * (ADR 0055). Like them, each client decodes its first answer and checks the status of the
 * others; `check` decodes every answer.
 */
function httpSenders(routeUrl: string, concurrency: number, rows: number): { sends: Send[]; check: Send; close(): Promise<void> } {
  const url = new URL(routeUrl);
  const pool = new Pool(url.origin, { connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
  const body = httpBody(rows);
  const post = (model: string, decode: boolean): Promise<number> =>
    new Promise((resolve, reject) => {
      let status = 0;
      const chunks: Buffer[] = [];
      pool.dispatch(
        { method: 'POST', path: `${url.pathname}/v2/models/${model}/infer`, headers: { 'content-type': 'application/json' }, body },
        {
          // Its presence tells undici the handler speaks the new API (onResponse*), not the old (onHeaders, onData).
          onRequestStart: () => undefined,
          onResponseStart: (_c, statusCode) => void (status = statusCode),
          onResponseData: (_c, chunk) => void chunks.push(chunk),
          onResponseEnd: () => {
            const text = Buffer.concat(chunks).toString();
            if (status !== 200) reject(new Error(`HTTP ${status} ${text.slice(0, 200)}`));
            else resolve(decode ? ((JSON.parse(text) as { outputs: { data: number[] }[] }).outputs[0]?.data[0] ?? Number.NaN) : Number.NaN);
          },
          onResponseError: (_c, err) => reject(err),
        },
      );
    });
  const sends = Array.from({ length: concurrency }, (): Send => {
    let decoded = false;
    return async (model) => {
      const value = await post(model, !decoded);
      decoded = true;
      return value;
    };
  });
  return { sends, check: (model) => post(model, true), close: () => pool.close() };
}

type Unary = (req: unknown, md: Metadata, cb: (err: ServiceError | null, res: { outputs: { contents?: { fp32_contents?: number[] } }[] }) => void) => void;

/** One channel per client: grpc-js would otherwise share one connection among channels to the same address. */
function grpcJsSenders(address: string, concurrency: number, rows: number): { sends: Send[]; check: Send; close(): void } {
  const Ctor = inferenceClient();
  const clients = Array.from({ length: concurrency }, () => new Ctor(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as unknown as Client & { ModelInfer: Unary });
  const data = rowsOf(rows).flat();
  const sends = clients.map(
    (c): Send =>
      (model) =>
        new Promise((resolve, reject) =>
          c.ModelInfer({ model_name: model, inputs: [{ name: WINE_INPUT, datatype: 'FP32', shape: [rows, WINE_FEATURES], contents: { fp32_contents: data } }] }, new Metadata(), (err, res) =>
            err ? reject(err) : resolve(res.outputs[0]?.contents?.fp32_contents?.[0] ?? Number.NaN),
          ),
        ),
  );
  return { sends, check: sends[0] as Send, close: () => clients.forEach((c) => c.close()) };
}

const GRPC_CLIENTS: Record<Options['grpcClient'], string> = {
  frames: "one connection per client on the project's own HTTP/2 framing (harness/frame-grpc-client.ts), each message encoded once up front",
  'node-http2': 'one node:http2 client session per client, each message encoded once up front',
  'grpc-js': 'one grpc-js channel per client',
};

const ownCpuSeconds = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** `work`'s result with the CPU of the router, the replicas and this process across it. */
async function withCpu<T>(pool: ModelmuxLocal, work: () => Promise<T>): Promise<T & CpuUse> {
  const pids = { router: pool.routerPid === undefined ? [] : [pool.routerPid], replicas: pool.replicaPids };
  const cpu0 = await Promise.all([totalCpuSeconds(pids.router), totalCpuSeconds(pids.replicas)]);
  const own0 = ownCpuSeconds();
  const result = await work();
  const own1 = ownCpuSeconds();
  const cpu1 = await Promise.all([totalCpuSeconds(pids.router), totalCpuSeconds(pids.replicas)]);
  return { ...result, routerCpuSeconds: cpu1[0] - cpu0[0], replicaCpuSeconds: cpu1[1] - cpu0[1], benchCpuSeconds: own1 - own0 };
}

/** `concurrency` closed-loop clients for `ms`, models in turn; CPU of the router, the replicas and this process across the window. */
async function measure(pool: ModelmuxLocal, protocol: Protocol, round: number, sends: readonly Send[], ids: readonly string[], ms: number): Promise<Window> {
  const pauses = clientPauses();
  try {
    // Read outside the CPU window: a scrape costs the processes a little.
    const servers0 = await serverGcMs(pool);
    const w = await withCpu(pool, () => closedLoop(protocol, round, sends, ids, ms));
    const servers1 = await serverGcMs(pool);
    const { totalMs, maxMs } = pauses.take();
    const since = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined || b === undefined ? undefined : b - a);
    return { ...w, clientGcMs: totalMs, clientGcMaxMs: maxMs, routerGcMs: since(servers0.router, servers1.router), replicaGcMs: since(servers0.replicas, servers1.replicas) };
  } finally {
    pauses.stop();
  }
}

/** The router's and the replicas' collection pauses so far, in ms: Node's default metrics (docs/metrics.md). */
async function serverGcMs(pool: ModelmuxLocal): Promise<{ router: number | undefined; replicas: number | undefined }> {
  const pausedMs = async (url: string, program: string): Promise<number | undefined> => {
    const family = `modelmux_${program}_nodejs_gc_duration_seconds`;
    const seconds = readMetric(await (await fetch(`${url}/metrics`)).text(), `${family}_sum`, {}, family);
    return seconds === undefined ? undefined : seconds * 1000;
  };
  const [router, ...replicas] = await Promise.all([pausedMs(pool.adminUrl, 'router'), ...pool.replicaUrls.map((u) => pausedMs(u, 'replica'))]);
  return { router, replicas: replicas.some((r) => r === undefined) ? undefined : replicas.reduce<number>((sum, r) => sum + (r as number), 0) };
}

async function closedLoop(protocol: Protocol, round: number, sends: readonly Send[], ids: readonly string[], ms: number): Promise<Omit<Window, keyof CpuUse | keyof Pauses>> {
  const latencies: number[] = [];
  let requests = 0;
  let ok = 0;
  let firstFailure: string | undefined;
  let turn = 0;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    sends.map(async (send) => {
      while (performance.now() < end) {
        requests++;
        const t0 = performance.now();
        try {
          await send(ids[turn++ % ids.length] as string);
          latencies.push(performance.now() - t0);
          ok++;
        } catch (err) {
          firstFailure ??= err instanceof Error ? err.message : String(err);
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return { protocol, round, requests, ok, ...(firstFailure !== undefined ? { firstFailure } : {}), seconds, latency: summarize(latencies) };
}

/** vegeta and what it sends: a targets file per protocol, each model in turn, in a folder of their own. */
interface OpenLoopClient {
  bin: string;
  dir: string;
  targets: Record<Protocol, string>;
}

/** The same requests as the closed loop's: each model's JSON body and its framed ModelInfer message. */
async function openLoopClient(repoRoot: string, ids: readonly string[], routeUrl: string, grpcAddress: string, rows: number): Promise<OpenLoopClient> {
  const bin = await vegetaBinary(repoRoot);
  const dir = await mkdtemp(join(tmpdir(), 'bench-grpc-'));
  const messages = inferMessages(ids, rows);
  const json = join(dir, 'infer.json');
  await writeFile(json, httpBody(rows));
  for (const [id, message] of messages) await writeFile(join(dir, `${id}.bin`), message);
  const targets = { http: join(dir, 'http.targets'), grpc: join(dir, 'grpc.targets') };
  await writeFile(targets.http, targetsText(ids.map((id) => ({ url: `${routeUrl}/v2/models/${id}/infer`, headers: { 'Content-Type': 'application/json' }, bodyFile: json }))));
  await writeFile(
    targets.grpc,
    targetsText(
      ids.map((id) => ({ url: `http://${grpcAddress}/inference.GRPCInferenceService/ModelInfer`, headers: { 'Content-Type': 'application/grpc', Te: 'trailers' }, bodyFile: join(dir, `${id}.bin`) })),
    ),
  );
  return { bin, dir, targets };
}

/** ModelInfer calls the router answered OK: a gRPC answer is a 200 whatever its grpc-status, which vegeta does not read. */
async function grpcCallsOk(pool: ModelmuxLocal): Promise<number> {
  return sumMetric(await (await fetch(`${pool.adminUrl}/metrics`)).text(), 'modelmux_router_grpc_requests_total', { method: 'ModelInfer', code: 'OK' });
}

/** One open-loop window of `seconds` at `rateRps`, its results in `out`. */
async function measureOpen(pool: ModelmuxLocal, client: OpenLoopClient, protocol: Protocol, round: number, seconds: number, rateRps: number, out: string): Promise<OpenWindow> {
  const okBefore = protocol === 'grpc' ? await grpcCallsOk(pool) : 0;
  const cpu = await withCpu(pool, async () => {
    await attack(client.bin, { targetsFile: client.targets[protocol], ratePerSecond: rateRps, seconds, h2c: protocol === 'grpc', out });
    return {};
  });
  const summary = await vegetaReport(client.bin, [out]);
  const ok = protocol === 'grpc' ? Math.min(summary.statusCodes['200'] ?? 0, (await grpcCallsOk(pool)) - okBefore) : (summary.statusCodes['200'] ?? 0);
  return { protocol, round, offeredRps: rateRps, summary, errors: summary.requests - ok, ...cpu };
}

/** Every model once by each protocol, checked against the reference forward pass: a fast wrong answer never counts. */
async function checkAnswers(ids: readonly string[], http: Send, grpc: Send): Promise<void> {
  const hidden = hiddenUnitsForBytes(undefined);
  for (const id of ids) {
    const expected = wineForward(wineWeights(id, hidden), [SAMPLE_WINE])[0] ?? Number.NaN;
    for (const [protocol, send] of [
      ['http', http],
      ['grpc', grpc],
    ] as const) {
      const got = await send(id);
      if (!(Math.abs(got - expected) <= 1e-3 * Math.max(1, Math.abs(expected)))) throw new Error(`wrong ${protocol} answer for ${id}: ${got}, expected ${expected}`);
    }
  }
}

/** Each round's order of protocols, alternating, so neither always runs first on a machine that drifts. */
const orderOf = (round: number): readonly Protocol[] => (round % 2 === 0 ? ['http', 'grpc'] : ['grpc', 'http']);

const perCpuSecond = (ok: number, cpu: number): number => (cpu > 0 ? ok / cpu : Number.NaN);

const protocolName = (p: Protocol): string => (p === 'http' ? 'HTTP/JSON' : 'gRPC');

/** The open-loop windows and the rate they were offered (0: none ran). */
interface OpenLoop {
  rateRps: number;
  windows: OpenWindow[];
  /** Each protocol's requests over all its windows: the p99 a client of that protocol saw. */
  pooled: Partial<Record<Protocol, VegetaSummary>>;
}

function openLoopSetup(o: Options, closed: readonly Window[], open: OpenLoop): string {
  if (open.rateRps === 0)
    return o.rate === 0 ? 'No open-loop windows (`--rate 0`).' : 'No open-loop windows: a protocol answered nothing in the closed loop, so there was no rate below saturation to offer.';
  const why =
    o.rate === undefined
      ? `${DEFAULT_RATE_FRACTION * 100}% of this run's lower closed-loop rate, ${fmt(defaultOfferedRate(closed, 1), 0)} req/s: below saturation for both; \`--rate\` sets it`
      : `\`--rate ${o.rate}\``;
  return (
    `Then, after an unmeasured window of each, per round and in the same order, one open-loop window per protocol, ${o.durationSeconds} s each, at an equal offered load of ${open.rateRps} req/s (${why}), ` +
    'the same requests, models in turn, sent by vegeta (a Go load generator, its own process): at a constant rate whatever the answers, each request from a goroutine of its own, over HTTP/1.1 with a connection for each request in flight and over h2c with the calls multiplexed on one connection. ' +
    "The same client code for both protocols, with Go's concurrent collector: the benchmark process's own node:http2 clients paused 10–40 ms for their collections, which landed in the tail of whichever protocol's window they fell in. " +
    "A gRPC call counts as answered only if the router counted it OK (vegeta reads no grpc-status). Router µs/req: the router's CPU over the window's requests."
  );
}

function openLoopSection(open: OpenLoop): ReportSection {
  const failed = open.windows.filter((w) => w.errors > 0);
  const latencies = open.windows.map((w) => ({ protocol: w.protocol, latency: w.summary.latency }));
  const pooled = (p: Protocol, f: (s: VegetaSummary) => number): string => {
    const s = open.pooled[p];
    return s === undefined ? '–' : fmt(f(s), 2);
  };
  return {
    heading: 'At an equal offered load (open loop)',
    // Issue 51's p99 target is judged here, so RESULTS.md shows it beside the closed loop's CPU ratio.
    headline: true,
    table: {
      header: ['round', 'protocol', 'offered req/s', 'answered req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'router µs/req', 'replicas µs/req', 'errors'],
      rows: open.windows.map((w) => [
        String(w.round + 1),
        protocolName(w.protocol),
        fmt(w.offeredRps, 0),
        fmt(w.summary.throughput, 0),
        fmt(w.summary.latency.p50Ms, 2),
        fmt(w.summary.latency.p90Ms, 2),
        fmt(w.summary.latency.p99Ms, 2),
        fmt(w.summary.latency.maxMs, 2),
        fmt((w.routerCpuSeconds * 1e6) / w.summary.requests, 0),
        fmt((w.replicaCpuSeconds * 1e6) / w.summary.requests, 0),
        String(w.errors),
      ]),
    },
    after:
      `**p99 at an equal offered load of ${open.rateRps} req/s, over all windows of each protocol: gRPC ${pooled('grpc', (s) => s.latency.p99Ms)} ms, HTTP ${pooled('http', (s) => s.latency.p99Ms)} ms** ` +
      `(p50 ${pooled('grpc', (s) => s.latency.p50Ms)} and ${pooled('http', (s) => s.latency.p50Ms)} ms); ` +
      `worst window's p99: gRPC ${fmt(worstP99Ms(latencies, 'grpc'), 2)} ms, HTTP ${fmt(worstP99Ms(latencies, 'http'), 2)} ms.${
        failed.length > 0
          ? ` Windows with errors: ${failed.map((w) => `round ${w.round + 1} ${w.protocol}: ${w.errors} of ${w.summary.requests}${w.summary.errors.length > 0 ? ` (${w.summary.errors.slice(0, 2).join('; ')})` : ''}`).join('; ')}.`
          : ''
      }`,
  };
}

function report(o: Options, windows: readonly Window[], open: OpenLoop): BenchReport {
  const rows = windows.map((w) => [
    String(w.round + 1),
    protocolName(w.protocol),
    fmt(w.ok / w.seconds, 0),
    fmt(w.latency.p50Ms, 2),
    fmt(w.latency.p99Ms, 2),
    fmt(perCpuSecond(w.ok, w.routerCpuSeconds), 0),
    fmt((w.routerCpuSeconds * 1e6) / w.ok, 0),
    fmt(perCpuSecond(w.ok, w.replicaCpuSeconds), 0),
    fmt((w.replicaCpuSeconds * 1e6) / w.ok, 0),
    fmt((w.benchCpuSeconds * 1e6) / w.ok, 0),
    `${fmt(w.clientGcMs, 0)} (${fmt(w.clientGcMaxMs, 1)})`,
    `${w.routerGcMs === undefined ? '—' : fmt(w.routerGcMs, 0)} / ${w.replicaGcMs === undefined ? '—' : fmt(w.replicaGcMs, 0)}`,
    String(w.requests - w.ok),
  ]);
  const total = (p: Protocol, f: (w: Window) => number): number => windows.filter((w) => w.protocol === p).reduce((s, w) => s + f(w), 0);
  const ratio = (f: (w: Window) => number): number => total('grpc', (w) => w.ok) / total('grpc', f) / (total('http', (w) => w.ok) / total('http', f));
  // The issue's target reads as CPU per request, and the p99 of each protocol's worst window.
  const perRequest = (p: Protocol, f: (w: Window) => number): number => (total(p, f) * 1e6) / total(p, (w) => w.ok);
  return {
    title: 'V2 inference over HTTP/JSON and over gRPC, through the router',
    setup:
      `\`modelmux local\` with ${o.replicas} replicas and ${o.models} small example models, all loaded; ${o.concurrency} closed-loop clients per protocol, ` +
      `models in turn, ${o.rows} row${o.rows === 1 ? '' : 's'} of ${WINE_FEATURES} FP32 features per request, ${o.durationSeconds} s per window after ${o.warmupSeconds} s unmeasured per protocol. ` +
      "HTTP: `POST /wine/v2/models/<id>/infer` with a JSON body over keep-alive connections (one per client, undici's `dispatch`, the body built once up front); gRPC: `ModelInfer` with `fp32_contents` to the router's gRPC port, " +
      GRPC_CLIENTS[o.grpcClient] +
      ` (\`--grpc-client ${o.grpcClient}\`). ` +
      'CPU seconds of the router process and of the replica processes from /proc across each window, and of the benchmark process, where the clients run (client µs/req): on a machine with few cores the clients compete with the router and replicas, and their cost weighs on the latency. ' +
      "Client GC ms: the benchmark process's collection pauses across the window, in all and the longest, which every client in flight waits out and counts in its latency; router / replicas GC ms: theirs in all (the replicas' summed), from their /metrics (`modelmux_<program>_nodejs_gc_duration_seconds`), which every request they hold waits out. " +
      openLoopSetup(o, windows, open),
    sections: [
      {
        headline: true,
        table: {
          header: [
            'round',
            'protocol',
            'req/s',
            'p50 ms',
            'p99 ms',
            'router req/CPU-s',
            'router µs/req',
            'replicas req/CPU-s',
            'replicas µs/req',
            'client µs/req',
            'client GC ms (longest)',
            'router / replicas GC ms',
            'errors',
          ],
          rows,
        },
        after:
          `**gRPC / HTTP requests per CPU-second: router ${fmt(
            ratio((w) => w.routerCpuSeconds),
            2,
          )}×, replicas ${fmt(
            ratio((w) => w.replicaCpuSeconds),
            2,
          )}×** ` +
          `(over all windows of each protocol); router CPU per request gRPC / HTTP ${fmt(1 / ratio((w) => w.routerCpuSeconds), 2)}×; ` +
          `the clients' CPU per request (${o.grpcClient} gRPC clients): gRPC ${fmt(
            perRequest('grpc', (w) => w.benchCpuSeconds),
            0,
          )} µs, HTTP ${fmt(
            perRequest('http', (w) => w.benchCpuSeconds),
            0,
          )} µs; ` +
          `p99 of the worst window: gRPC ${fmt(worstP99Ms(windows, 'grpc'), 2)} ms, HTTP ${fmt(worstP99Ms(windows, 'http'), 2)} ms.${
            windows.some((w) => w.firstFailure)
              ? ` First failures: ${windows
                  .filter((w) => w.firstFailure)
                  .map((w) => `${w.protocol}: ${w.firstFailure ?? ''}`)
                  .join('; ')}.`
              : ''
          }`,
      },
      ...(open.windows.length > 0 ? [openLoopSection(open)] : []),
    ],
    data: { windows, openLoop: open },
  };
}

/** After an unmeasured window of each protocol, `o.rounds` rounds of one window each, alternating; then each protocol's windows together. */
async function openLoop(
  repoRoot: string,
  pool: ModelmuxLocal,
  o: Options,
  ids: readonly string[],
  routeUrl: string,
  grpcAddress: string,
  rateRps: number,
  log: (msg: string) => void,
): Promise<Omit<OpenLoop, 'rateRps'>> {
  log(`open loop at ${rateRps} req/s per protocol (vegeta)`);
  const client = await openLoopClient(repoRoot, ids, routeUrl, grpcAddress, o.rows);
  try {
    if (o.warmupSeconds > 0) for (const p of ['http', 'grpc'] as const) await measureOpen(pool, client, p, -1, o.warmupSeconds, rateRps, join(client.dir, `warmup-${p}.bin`));
    const windows: OpenWindow[] = [];
    const results: Record<Protocol, string[]> = { http: [], grpc: [] };
    for (let round = 0; round < o.rounds; round++) {
      for (const p of orderOf(round)) {
        const out = join(client.dir, `${p}-${round}.bin`);
        const w = await measureOpen(pool, client, p, round, o.durationSeconds, rateRps, out);
        windows.push(w);
        results[p].push(out);
        log(`open loop round ${round + 1} ${p}: ${w.summary.throughput.toFixed(0)} req/s, p99 ${w.summary.latency.p99Ms.toFixed(2)} ms, ${w.errors} errors`);
      }
    }
    return { windows, pooled: { http: await vegetaReport(client.bin, results.http), grpc: await vegetaReport(client.bin, results.grpc) } };
  } finally {
    await rm(client.dir, { recursive: true, force: true });
  }
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  const log = (msg: string): void => void process.stderr.write(`[bench:grpc ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  const ids = modelIds(o.models);
  const dir = modelDirFor(0);
  await ensureModelFiles(dir, ids, 0);
  log(`starting modelmux local: ${o.replicas} replicas`);
  const pool = await startModelmuxLocal(repoRoot, {
    port: 0,
    replicas: o.replicas,
    maxModelsPerReplica: o.models,
    maxOngoingRequests: Math.max(16, o.concurrency),
    maxBatchSize: 1,
    batchWaitMs: 0,
    modelSource: `file://${dir}`,
  });
  const windows: Window[] = [];
  const open: OpenLoop = { rateRps: 0, windows: [], pooled: {} };
  const address = /^\s+grpc\s+(\S+)$/m.exec(pool.child.output())?.[1];
  const routeUrl = pool.url.replace(/\/$/, '');
  const http = httpSenders(routeUrl, o.concurrency, o.rows);
  let grpc: { sends: Send[]; check: Send; close(): void } | undefined;
  try {
    if (address === undefined) throw new Error(`modelmux local printed no gRPC address:\n${pool.child.output()}`);
    grpc = o.grpcClient === 'grpc-js' ? grpcJsSenders(address, o.concurrency, o.rows) : await rawGrpcSenders(o.grpcClient, address, o.concurrency, ids, o.rows);
    await checkAnswers(ids, http.check, grpc.check);
    const senders: Record<Protocol, Send[]> = { http: http.sends, grpc: grpc.sends };
    for (const p of ['http', 'grpc'] as const) if (o.warmupSeconds > 0) await measure(pool, p, -1, senders[p], ids, o.warmupSeconds * 1000);
    for (let round = 0; round < o.rounds; round++) {
      for (const p of orderOf(round)) {
        const w = await measure(pool, p, round, senders[p], ids, o.durationSeconds * 1000);
        windows.push(w);
        log(
          `round ${round + 1} ${p}: ${(w.ok / w.seconds).toFixed(0)} req/s, p99 ${w.latency.p99Ms.toFixed(2)} ms, router ${perCpuSecond(w.ok, w.routerCpuSeconds).toFixed(0)} req/CPU-s, ${w.requests - w.ok} errors`,
        );
      }
    }
    open.rateRps = o.rate ?? defaultOfferedRate(windows);
    if (open.rateRps > 0) Object.assign(open, await openLoop(repoRoot, pool, o, ids, routeUrl, address, open.rateRps, log));
  } finally {
    grpc?.close();
    await http.close();
    await pool.stop();
  }
  await writeReport(run, report(o, windows, open));
}

await runBench({ name: 'grpc', summary: 'V2 over HTTP/JSON and over gRPC through the router: CPU per request of router and replicas, p50, p99.', schema, specs }, main);
