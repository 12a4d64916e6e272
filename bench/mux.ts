import { execFile } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { booleanString, parseConfig, type OptionSpecs, intString } from '../common/config.js';
import { logOptionSpecs, logOptionsShape } from '../common/log-options.js';
import { REPLICA_ENV } from '../common/replica-env.js';
import { hiddenUnitsForBytes, SAMPLE_WINE } from '../common/wine-model.js';
import { freePorts } from '../test/helpers/s3-server.js';
import { openBenchStore, type BenchStore } from './lib/bench-store.js';
import { checkAnswer } from './lib/answer-check.js';
import { commaList } from './lib/comma-list.js';
import { globalLruMisses } from './lib/global-lru.js';
import type { LoadStats } from './lib/load-stats.js';
import { everyModelOnce, failureText, runLoad, type LoadResult } from './lib/load-generator.js';
import { totalCpuSeconds, treePids } from './lib/proc-cpu.js';
import { machineInfo, machineLine, type MachineInfo } from './lib/machine.js';
import { fmt, mdTable } from './lib/markdown.js';
import { medianBy, rotated } from './lib/stats.js';
import { ensureModelFiles, modelDirFor } from './lib/model-set.js';
import { startModelmuxLocal } from './lib/modelmux-local.js';
import { startRayServe } from './lib/ray-serve.js';
import { idSampler, modelIds, PATTERN_LABELS, PATTERNS, type PatternName } from './lib/traffic.js';
import { DEFAULT_PARAMS, type PolicyName } from './simulator/simulate.js';
import { runBenchmark, writeResults } from './lib/entry.js';

/**
 * `npm run bench:mux`: modelmux local mode against a Ray Serve multiplexed deployment, the same
 * models in the same S3-compatible store (SeaweedFS), the same closed-loop load generator and
 * request mixes. Writes bench/results/mux.{json,md}.
 */

const SYSTEMS = ['modelmux', 'ray'] as const;
type System = (typeof SYSTEMS)[number];

const schema = z.object({
  models: intString(1, 100_000).default(200),
  modelBytes: intString(1000, 1_000_000_000).default(5_000_000),
  replicas: intString(1, 64).default(2),
  maxModels: intString(1, 10_000).default(8),
  maxOngoingRequests: intString(1, 10_000).default(16),
  maxBatchSize: intString(1, 1024).default(1),
  batchWaitMs: intString(0, 10_000).default(0),
  concurrency: intString(1, 10_000).default(16),
  warmupSeconds: z.coerce.number().min(0).max(3600).default(5),
  durationSeconds: z.coerce.number().min(1).max(3600).default(15),
  patterns: z.string().default(PATTERNS.join(',')),
  systems: z.string().default(SYSTEMS.join(',')),
  store: z.enum(['s3', 'file']).default('s3'),
  seed: intString(0, 2 ** 31).default(42),
  modelDir: z.string().optional(),
  out: z.string().default('bench/results/mux'),
  simulate: booleanString.default(true),
  raySessionOptions: z.enum(['modelmux', 'default']).default('modelmux'),
  firstPass: booleanString.default(true),
  rounds: intString(1, 20).default(1),
  ...logOptionsShape,
});
type Options = z.infer<typeof schema>;

const specs: OptionSpecs<typeof schema.shape> = {
  models: { flag: 'models', help: 'Generated models in the store (default 200).' },
  modelBytes: { flag: 'model-bytes', help: 'Size of each model file in bytes (default 5000000).' },
  replicas: { flag: 'replicas', help: 'Replicas of each system (default 2).' },
  maxModels: { flag: 'max-models', help: 'Models per replica: modelmux --max-models and Ray max_num_models_per_replica (default 8).' },
  maxOngoingRequests: { flag: 'max-ongoing-requests', help: 'Per replica, both systems (default 16).' },
  maxBatchSize: { flag: 'max-batch-size', help: 'Per-model batch size, both systems; 1 turns batching off (default 1).' },
  batchWaitMs: { flag: 'batch-wait-ms', help: 'Batch wait, both systems (default 0).' },
  concurrency: { flag: 'concurrency', help: 'Closed-loop clients, each with one request in flight (default 16).' },
  warmupSeconds: { flag: 'warmup-seconds', help: 'Unmeasured traffic of the same pattern before each measurement (default 5).' },
  durationSeconds: { flag: 'duration-seconds', help: 'Measured seconds per pattern per system (default 15).' },
  patterns: { flag: 'patterns', help: `Comma list of ${PATTERNS.join(', ')} (default all).` },
  systems: { flag: 'systems', help: 'Comma list of modelmux, ray (default both).' },
  store: { flag: 'store', help: 's3 (SeaweedFS, default) or file.' },
  seed: { flag: 'seed', help: 'Seed of the model sequences (default 42).' },
  modelDir: { flag: 'model-dir', help: 'Where generated models are kept between runs (default ~/.cache/modelmux/bench-models/<bytes>).' },
  out: { flag: 'out', help: 'Results path without extension (default bench/results/mux).' },
  simulate: { flag: 'simulate', help: "Add the placement simulator's table for the same pool (default true)." },
  firstPass: {
    flag: 'first-pass',
    help: 'Before the first pattern, request every model once, unmeasured, so no measured window holds the first download of a model to the machine (default true).',
  },
  rounds: {
    flag: 'rounds',
    help:
      "Measured rounds of every pattern, in an order rotated each round. The ratios, the spread and the simulator table then use each pattern's median round by throughput, and a line gives every round's throughput: how much the same pattern moves from one window to the next on this machine, against which the 15% spread target is read (default 1).",
  },
  raySessionOptions: { flag: 'ray-session-options', help: "onnxruntime session options of Ray's replicas: modelmux (the replica's own: 1 thread, no spinning, basic optimisation, no pre-packing; default) or default (onnxruntime's)." },
  ...logOptionSpecs,
};

interface Row {
  system: System;
  pattern: PatternName;
  /** 1-based: with `--rounds`, every pattern is measured once per round. */
  round: number;
  warmupRequests: number;
  result: Omit<LoadResult, 'sequence'>;
  loads: number;
  loadsPer1000: number;
  downloadsPer1000: number;
  idealLoadsPer1000: number;
  /** Mean time of one model load (download + session) during the measured part. */
  meanLoadMs: number;
  /** CPU seconds of the whole system (every process under it) per 1000 successful requests. */
  cpuSPer1000: number;
  /** CPU seconds the load generator itself used, to show it was not the bottleneck. */
  clientCpuS: number;
}

/** The unmeasured pass over every model before the first pattern: a system's cold start. */
interface FirstPass {
  system: System;
  seconds: number;
  requests: number;
  ok: number;
  loads: number;
  downloads: number;
}

/** Every round of `pattern` on `system`, in the order measured. */
function roundsOf(rows: readonly Row[], system: System, pattern: PatternName): Row[] {
  return rows.filter((r) => r.system === system && r.pattern === pattern);
}

/** The round of `pattern` on `system` with the median throughput (the lower middle of an even count). */
function medianRound(rows: readonly Row[], system: System, pattern: PatternName): Row | undefined {
  return medianBy(roundsOf(rows, system, pattern), (r) => r.result.throughputRps);
}

/** How far apart throughputs are, (max − min) / max in percent: across patterns, or one pattern's rounds. */
function rangePercent(t: readonly number[]): number {
  const max = Math.max(...t);
  return ((max - Math.min(...t)) / max) * 100;
}

interface Running {
  url: string;
  pid: number;
  loads(): Promise<LoadStats>;
  stop(): Promise<void>;
}

async function startSystem(system: System, o: Options, repoRoot: string, store: BenchStore, workDir: string): Promise<Running> {
  const common = {
    replicas: o.replicas,
    maxModelsPerReplica: o.maxModels,
    maxOngoingRequests: o.maxOngoingRequests,
    maxBatchSize: o.maxBatchSize,
    batchWaitMs: o.batchWaitMs,
    modelSource: store.source,
    env: store.env,
    ...(store.endpoint ? { s3Endpoint: store.endpoint } : {}),
  };
  if (system === 'modelmux') {
    // Its replicas and router read the level from their environment; Ray logs as it does by default.
    const mux = await startModelmuxLocal(repoRoot, { ...common, env: { ...common.env, [REPLICA_ENV.logLevel]: o.logLevel }, port: 0 });
    return { ...mux, pid: mux.child.pid };
  }
  const [port] = await freePorts(1);
  const ray = await startRayServe(repoRoot, { ...common, port: port ?? 8000, loadLog: join(workDir, 'ray-loads.log'), sessionOptions: o.raySessionOptions });
  return { ...ray, pid: ray.child.pid };
}

interface SimLine {
  pattern: PatternName;
  policy: PolicyName;
  loadsPer1000: number;
  p99WaitMs: number;
}

/** The simulator's rows for this pool, from a child process bounded to `timeoutMs`. */
async function simulatorTable(o: Options, patterns: readonly PatternName[], repoRoot: string, measured: readonly Row[], timeoutMs = 120_000): Promise<string> {
  const args = [join(repoRoot, 'dist/bench/lib/sim-rows.js'), String(o.replicas), String(o.maxModels), String(o.models), String(o.maxOngoingRequests), patterns.join(',')];
  const out = await new Promise<string>((resolve) => {
    execFile(process.execPath, args, { timeout: timeoutMs, maxBuffer: 16 << 20 }, (_err, stdout) => resolve(stdout));
  });
  const lines = out.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Partial<SimLine> & { params?: typeof DEFAULT_PARAMS });
  const params = lines[0]?.params ?? DEFAULT_PARAMS;
  const results = lines.slice(1) as SimLine[];
  const cell = (pattern: PatternName, policy: PolicyName, f: (r: SimLine) => number): string => {
    const r = results.find((x) => x.pattern === pattern && x.policy === policy);
    return r ? fmt(f(r)) : 'did not finish';
  };
  const real = (system: System, p: PatternName, f: (r: Row) => number): string => {
    const r = medianRound(measured, system, p);
    return r ? fmt(f(r)) : 'n/a';
  };
  const rows = patterns.map((p) => [
    p,
    real('modelmux', p, (r) => r.loadsPer1000),
    real('ray', p, (r) => r.loadsPer1000),
    real('modelmux', p, (r) => r.idealLoadsPer1000),
    cell(p, 'modelmux', (r) => r.loadsPer1000),
    cell(p, 'ray-like', (r) => r.loadsPer1000),
    cell(p, 'ideal', (r) => r.loadsPer1000),
    cell(p, 'modelmux', (r) => r.p99WaitMs),
    cell(p, 'ray-like', (r) => r.p99WaitMs),
  ]);
  return [
    `Measured load rates beside the placement simulator's (bench/simulator) for the same shape: ${o.replicas} replicas × ${o.maxModels} slots, ${o.models} models, maxOngoingRequests ${o.maxOngoingRequests}; ` +
      `simulator defaults otherwise: ${params.routers} routers, inference ${params.inferMs} ms, load ${params.loadMs} ms, ${params.busy * 100}% busy, ` +
      `${params.durationMs / 1000} s of which ${params.warmupMs / 1000} s warm-up; "did not finish" = not done within ${timeoutMs / 1000} s):`,
    '',
    mdTable(['pattern', 'measured modelmux loads/1000', 'measured Ray loads/1000', 'measured ideal global LRU loads/1000', 'sim modelmux loads/1000', 'sim ray-like loads/1000', 'sim ideal global LRU loads/1000', 'sim modelmux p99 wait ms', 'sim ray-like p99 wait ms'], rows),
  ].join('\n');
}

function firstPassLine(passes: readonly FirstPass[], models: number, concurrency: number): string[] {
  if (passes.length === 0) return [];
  const each = passes.map((f) => `${f.system} ${fmt(f.seconds)} s (${f.loads} loads, ${f.downloads} downloads${f.ok < f.requests ? `, ${f.requests - f.ok} failed` : ''})`);
  return [`First pass, unmeasured, before the first pattern (each of the ${models} models requested once, ${concurrency} at a time: the cold start): ${each.join('; ')}.`, ''];
}

function report(o: Options, m: MachineInfo, rows: readonly Row[], passes: readonly FirstPass[], patterns: readonly PatternName[], command: string, sim: string | undefined): string {
  const get = (s: System, p: PatternName): Row | undefined => medianRound(rows, s, p);
  const byRound = o.rounds > 1;
  const measured = mdTable(
    [...(byRound ? ['round'] : []), 'pattern', 'system', 'requests', 'errors', 'throughput req/s', 'p50 ms', 'p99 ms', 'loads / 1000 req', 'ideal global LRU loads / 1000', 'downloads / 1000 req', 'mean load ms (as each system times it)', 'system CPU s / 1000 req', 'load generator CPU s'],
    rows.map((r) => [
      ...(byRound ? [String(r.round)] : []),
      PATTERN_LABELS[r.pattern],
      r.system,
      String(r.result.requests),
      String(r.result.requests - r.result.ok),
      fmt(r.result.throughputRps),
      fmt(r.result.latency.p50Ms, 2),
      fmt(r.result.latency.p99Ms, 2),
      fmt(r.loadsPer1000),
      fmt(r.idealLoadsPer1000),
      fmt(r.downloadsPer1000),
      fmt(r.meanLoadMs, 0),
      fmt(r.cpuSPer1000, 2),
      fmt(r.clientCpuS, 2),
    ]),
  );
  const ratioRows: string[][] = [];
  for (const p of patterns) {
    const a = get('modelmux', p);
    const b = get('ray', p);
    if (!a || !b) continue;
    const thr = a.result.throughputRps / b.result.throughputRps;
    const p99 = a.result.latency.p99Ms / b.result.latency.p99Ms;
    const loadsVsRay = b.loadsPer1000 === 0 ? (a.loadsPer1000 === 0 ? 1 : Infinity) : a.loadsPer1000 / b.loadsPer1000;
    const loadsVsIdeal = a.idealLoadsPer1000 === 0 ? (a.loadsPer1000 === 0 ? 1 : Infinity) : a.loadsPer1000 / a.idealLoadsPer1000;
    const ok = (c: boolean): string => (c ? 'met' : '**missed**');
    ratioRows.push([
      PATTERN_LABELS[p],
      `${fmt(thr, 2)} (${ok(thr >= 5)})`,
      `${fmt(p99, 3)} (${ok(p99 <= 0.2)})`,
      `${fmt(loadsVsRay, 2)} (${ok(a.loadsPer1000 <= b.loadsPer1000)})`,
      `${fmt(loadsVsIdeal, 2)} (${ok(loadsVsIdeal <= 1.2)})`,
    ]);
  }
  const spread = (s: System): string => {
    const t = patterns.map((p) => get(s, p)?.result.throughputRps).filter((x): x is number => x !== undefined);
    if (t.length < 2) return 'n/a';
    return `${fmt(rangePercent(t))}% (min ${fmt(Math.min(...t))} / max ${fmt(Math.max(...t))} req/s)`;
  };
  const everyRound = (s: System): string => {
    const each = patterns.flatMap((p) => {
      const t = roundsOf(rows, s, p).map((r) => r.result.throughputRps);
      if (t.length === 0) return [];
      return [`${p} ${t.map((x) => fmt(x, 0)).join(', ')} (${fmt(rangePercent(t), 0)}%)`];
    });
    return each.length === 0 ? '' : `${s}: ${each.join('; ')}`;
  };
  const roundLines = byRound
    ? [
        '',
        `Throughput in req/s of each pattern in rounds 1–${o.rounds}, and how far apart they are (max − min) / max: the same pattern's move from one window to the next, the noise under the spread target. ` +
          `The ratios, the spread and the simulator table use each pattern's median round. ${SYSTEMS.map(everyRound).filter(Boolean).join('. ')}.`,
      ]
    : [];
  return [
    `## Multiplexing: modelmux local vs Ray Serve`,
    '',
    `Command: \`${command}\``,
    '',
    `Machine: ${machineLine(m)}`,
    '',
    `Setup: ${o.models} models of ${(o.modelBytes / 1e6).toFixed(1)} MB in ${o.store === 's3' ? 'one SeaweedFS S3 bucket' : 'one folder'}; ` +
      `${o.replicas} replicas × ${o.maxModels} models each (${o.replicas * o.maxModels} slots) on both systems; maxOngoingRequests ${o.maxOngoingRequests}; ` +
      `batching ${o.maxBatchSize > 1 ? `max ${o.maxBatchSize}, wait ${o.batchWaitMs} ms` : 'off'} on both; ` +
      `onnxruntime sessions ${o.raySessionOptions === 'modelmux' ? "with the same options on both (modelmux's replica's: 1 thread, no spinning, basic graph optimisation, no weight pre-packing)" : "with modelmux's options on modelmux and onnxruntime's defaults on Ray"}; ` +
      `modelmux's processes at log level ${o.logLevel}, Ray Serve's logging as it comes; ` +
      `closed loop with ${o.concurrency} concurrent clients, one row per request (Ray Serve form: POST with serve_multiplexed_model_id); ` +
      `${o.firstPass ? 'every model requested once before the first pattern; ' : ''}per pattern ${o.warmupSeconds} s warm-up then ${o.durationSeconds} s measured` +
      `${byRound ? `, in ${o.rounds} rounds, the patterns' order rotated each round` : ''}; seed ${o.seed}.`,
    '',
    ...firstPassLine(passes, o.models, o.concurrency),
    measured,
    '',
    'Ratios modelmux / Ray (targets: throughput ≥ 5, p99 ≤ 0.2, loads ≤ Ray\'s, loads ≤ 1.2 × ideal):',
    '',
    mdTable(['pattern', 'throughput ×', 'p99 ×', 'loads vs Ray ×', 'modelmux loads vs ideal ×'], ratioRows),
    '',
    `Throughput spread across patterns (target ≤ 15%)${byRound ? ', median rounds' : ''}: modelmux ${spread('modelmux')}; Ray ${spread('ray')}.`,
    ...roundLines,
    ...(sim ? ['', sim] : []),
    '',
  ].join('\n');
}

export async function main(argv: string[]): Promise<void> {
  const o = parseConfig('bench mux', 'Multiplexing benchmark: modelmux local vs Ray Serve.', schema, specs, argv, process.env);
  const patterns = commaList('bench mux', o.patterns, PATTERNS, 'pattern');
  const systems = commaList('bench mux', o.systems, SYSTEMS, 'system');
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  const workDir = join(repoRoot, 'bench/results/.work');
  await mkdir(workDir, { recursive: true });
  const m = machineInfo();
  const log = (msg: string): void => void process.stderr.write(`[bench:mux ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

  const ids = modelIds(o.models);
  const modelDir = o.modelDir ?? modelDirFor(o.modelBytes);
  log(`models: ${o.models} × ${o.modelBytes} bytes in ${modelDir}`);
  const made = await ensureModelFiles(modelDir, ids, o.modelBytes);
  log(`models ready (${made.written} written, ${(made.totalBytes / 1e9).toFixed(2)} GB)`);

  const rows: Row[] = [];
  const passes: FirstPass[] = [];
  const store = await openBenchStore(o.store, modelDir, ids, log);
  try {
    const body = JSON.stringify({ instances: [SAMPLE_WINE] });
    for (const system of systems) {
      log(`starting ${system}`);
      const sys = await startSystem(system, o, repoRoot, store, workDir);
      try {
        const checked = ids[ids.length - 1] as string;
        await checkAnswer(sys.url, checked, hiddenUnitsForBytes(o.modelBytes));
        const history: string[] = [checked];
        if (o.firstPass) {
          // A model's first download to the machine is a cold-start cost, paid once; without this
          // pass a slow store left some of them in the first pattern's measured window.
          const before = await sys.loads();
          const pass = await everyModelOnce(sys.url, ids, o.concurrency, body);
          const after = await sys.loads();
          history.push(...pass.sequence);
          passes.push({ system, seconds: pass.elapsedMs / 1000, requests: pass.requests, ok: pass.ok, loads: after.count - before.count, downloads: after.downloads - before.downloads });
          log(`${system} first pass: ${pass.requests} requests in ${(pass.elapsedMs / 1000).toFixed(1)} s, ${failureText(pass)}`);
        }
        for (let round = 1; round <= o.rounds; round++) {
          for (const pattern of rotated(patterns, round - 1)) {
            const next = idSampler(pattern, ids, o.seed);
            const base = { url: sys.url, nextModel: next, concurrency: o.concurrency, body, maxRequests: Number.MAX_SAFE_INTEGER };
            const warm = await runLoad({ ...base, durationMs: o.warmupSeconds * 1000 });
            const before = await sys.loads();
            const pids = await treePids(sys.pid);
            const cpu0 = await totalCpuSeconds(pids);
            const client0 = process.cpuUsage();
            const run = await runLoad({ ...base, durationMs: o.durationSeconds * 1000 });
            const client = process.cpuUsage(client0);
            const cpuS = (await totalCpuSeconds(pids)) - cpu0;
            const after = await sys.loads();
            const loads = after.count - before.count;
            const loadSeconds = after.totalSeconds - before.totalSeconds;
            // The floor replays everything this system was sent since it started: its caches carry over between patterns.
            const seen = history.length + warm.sequence.length;
            history.push(...warm.sequence, ...run.sequence);
            const ideal = globalLruMisses(history, o.replicas * o.maxModels, seen);
            const { sequence: _seq, ...result } = run;
            rows.push({
              system,
              pattern,
              round,
              warmupRequests: warm.requests,
              result,
              loads,
              loadsPer1000: (1000 * loads) / Math.max(1, run.requests),
              downloadsPer1000: (1000 * (after.downloads - before.downloads)) / Math.max(1, run.requests),
              idealLoadsPer1000: (1000 * ideal.misses) / Math.max(1, ideal.requests),
              meanLoadMs: loads > 0 ? (1000 * loadSeconds) / loads : Number.NaN,
              cpuSPer1000: (1000 * cpuS) / Math.max(1, run.ok),
              clientCpuS: (client.user + client.system) / 1e6,
            });
            log(`${system} ${pattern}${o.rounds > 1 ? ` (round ${round})` : ''}: ${run.throughputRps.toFixed(1)} req/s, p50 ${run.latency.p50Ms.toFixed(2)} ms, p99 ${run.latency.p99Ms.toFixed(2)} ms, ` +
              `${loads} loads in ${run.requests} requests, ${failureText(run)}`);
          }
        }
      } finally {
        log(`stopping ${system}`);
        await sys.stop();
      }
    }
  } finally {
    await store.stop();
  }

  let sim: string | undefined;
  if (o.simulate) {
    try {
      log('running the placement simulator');
      sim = await simulatorTable(o, patterns, repoRoot, rows);
    } catch (err) {
      sim = `Simulator table unavailable: ${String(err)}`;
    }
  }
  const command = argv.length > 0 ? `npm run bench:mux -- ${argv.join(' ')}` : 'npm run bench:mux';
  const md = report(o, m, rows, passes, patterns, command, sim);
  await writeResults(repoRoot, o.out, { machine: m, options: o, command, firstPasses: passes, rows }, md);
}

await runBenchmark(main);
