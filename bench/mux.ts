import { mkdir, rm } from 'node:fs/promises';
import { loadavg, setPriority } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { booleanString, intString, type OptionSpecs } from '../common/config.js';
import { REPLICA_ENV } from '../common/replica-env.js';
import { freePorts } from '../cli/local-processes.js';
import { hiddenUnitsForBytes, SAMPLE_WINE } from '../common/wine-model.js';
import { checkAnswer } from './lib/answer-check.js';
import { openBenchStore } from './lib/bench-store.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { commaList } from './lib/comma-list.js';
import { isLoopback, listenersOf, type Listener } from './lib/listeners.js';
import { everyModelOnce } from './lib/load-generator.js';
import type { LoadStats } from './lib/load-stats.js';
import { fmt } from './lib/markdown.js';
import { checkDistinctAnswer, distinctDir, distinctIds, distinctShape, ensureDistinctModels, DISTINCT_KINDS } from './lib/model-families.js';
import { ensureModelFiles, modelDirFor, uploadModels } from './lib/model-set.js';
import { startModelmuxLocal } from './lib/modelmux-local.js';
import { NO_GRPC } from './lib/modelmux-pool.js';
import { rateLadder, runStep, sustainableRate, type StepResult } from './lib/open-loop.js';
import { niceValues, totalCpuSeconds, treePids } from './lib/proc-cpu.js';
import { startRayServe, type RayMode } from './lib/ray-serve.js';
import { repoRoot, writeReport, type ReportSection } from './lib/report.js';
import { scaleRun, type ScaleResult } from './lib/scale-run.js';
import { seededRandom } from './simulator/rng.js';
import { median, medianCi, rotated } from './lib/stats.js';
import { idSampler, modelIds } from './lib/traffic.js';

/**
 * `npm run bench:mux`: modelmux against Ray Serve in both of Ray's HTTP set-ups, on three model
 * families, with an open-loop load generator that steps the rate up, the systems taking turns
 * over rounds; then a scale run of one modelmux pool over 10,000 models. The method and why:
 * docs/adr/0038-fair-benchmark.md. Writes bench/results/mux.{json,md}.
 */

const FAMILIES = ['wine', 'own-sessions', 'distinct'] as const;
type Family = (typeof FAMILIES)[number];
const SYSTEMS = ['modelmux', 'ray-proxy', 'ray-haproxy'] as const;
type SystemName = (typeof SYSTEMS)[number];
/** modelmux-own: the same modelmux with graph sharing and weight mapping off, the own-sessions family's pool. */
type Runner = SystemName | 'modelmux-own';

const FAMILY_LABEL: Record<Family, string> = {
  wine: 'Wine MLP (identical graphs: modelmux shares one session per graph and maps weights)',
  'own-sessions': 'Wine MLP, modelmux with shareGraphs=false and mapWeights=false (a session per load, as Ray)',
  distinct: `Distinct graphs (every model its own graph: ${DISTINCT_KINDS.join(', ')}; 2–4 blocks, widths 384+8i)`,
};
const RUNNER_LABEL: Record<Runner, string> = {
  modelmux: 'modelmux',
  'modelmux-own': 'modelmux (own sessions)',
  'ray-proxy': 'Ray Serve, default proxy',
  'ray-haproxy': 'Ray Serve, HAProxy + throughput-optimized',
};
/** Issue 43's targets, stated once: modelmux's sustainable rate over the better of Ray's two set-ups. */
const TARGETS: Partial<Record<Family, number>> = { wine: 5, distinct: 3 };
const SCALE_TARGET = 1.2;

const schema = z.object({
  families: z.string().default(FAMILIES.join(',')),
  systems: z.string().default(SYSTEMS.join(',')),
  rounds: intString(1, 50).default(5),
  minRounds: intString(1, 50).default(3),
  roundMinutes: z.coerce.number().min(1).max(1000).default(40),
  wineModels: intString(1, 100_000).default(200),
  modelBytes: intString(1000, 1_000_000_000).default(5_000_000),
  distinctModels: intString(5, 1000).default(40),
  replicas: intString(1, 64).default(2),
  maxModels: intString(1, 10_000).default(8),
  maxOngoingRequests: intString(1, 10_000).default(16),
  startRps: z.coerce.number().min(1).max(100_000).default(10),
  rateFactor: z.coerce.number().min(1.05).max(10).default(1.5),
  maxRps: z.coerce.number().min(1).max(1_000_000).default(6000),
  stepSeconds: z.coerce.number().min(0.5).max(600).default(4),
  stepWarmupSeconds: z.coerce.number().min(0).max(600).default(1),
  p99LimitMs: z.coerce.number().min(1).max(60_000).default(250),
  connections: intString(1, 10_000).default(256),
  logLevel: z.enum(['info', 'warn', 'error']).default('warn'),
  accessLog: booleanString.default(false),
  seed: intString(0, 2 ** 31).default(42),
  nice: intString(-20, 19).default(-5),
  scale: booleanString.default(true),
  scaleModels: intString(1, 1_000_000).default(10_000),
  scaleModelBytes: intString(1000, 1_000_000_000).default(20_000),
  scaleReplicas: intString(1, 64).default(4),
  scaleRouters: intString(1, 16).default(2),
  scaleMaxModels: intString(1, 10_000).default(100),
  scaleRps: z.coerce.number().min(1).max(100_000).default(100),
  scaleWarmupRequests: intString(0, 10_000_000).default(2000),
  scaleRequests: intString(1, 10_000_000).default(4000),
  coldSamples: intString(1, 1000).default(20),
});
type Options = z.infer<typeof schema>;

const specs: OptionSpecs<typeof schema.shape> = {
  families: { flag: 'families', help: `Comma list of ${FAMILIES.join(', ')} (default all).` },
  systems: { flag: 'systems', help: `Comma list of ${SYSTEMS.join(', ')} (default all).` },
  rounds: { flag: 'rounds', help: 'Rounds in which every system steps up on every family, the order rotated each round (default 5).' },
  minRounds: { flag: 'min-rounds', help: 'Rounds run whatever --round-minutes says (default 3).' },
  roundMinutes: { flag: 'round-minutes', help: 'No round starts past this many minutes of rounds, once --min-rounds are done (default 40).' },
  wineModels: { flag: 'wine-models', help: 'Wine models (default 200).' },
  modelBytes: { flag: 'model-bytes', help: 'Size of each wine model (default 5000000).' },
  distinctModels: { flag: 'distinct-models', help: 'Models of the distinct-graph family, each its own graph (default 40).' },
  replicas: { flag: 'replicas', help: 'Replicas of each system (default 2).' },
  maxModels: { flag: 'max-models', help: 'Models per replica: modelmux --max-models, Ray max_num_models_per_replica (default 8).' },
  maxOngoingRequests: { flag: 'max-ongoing-requests', help: 'Per replica, both systems (default 16).' },
  startRps: { flag: 'start-rps', help: 'First rate of the step-up, requests per second (default 10).' },
  rateFactor: { flag: 'rate-factor', help: 'Each step of the step-up is this times the previous (default 1.5).' },
  maxRps: { flag: 'max-rps', help: 'Highest rate tried (default 6000).' },
  stepSeconds: { flag: 'step-seconds', help: 'Measured seconds per rate (default 4).' },
  stepWarmupSeconds: { flag: 'step-warmup-seconds', help: 'Unmeasured seconds at the same rate before each measured part (default 1).' },
  p99LimitMs: { flag: 'p99-limit-ms', help: 'A rate is sustained when every request succeeded and p99 from intended start is at most this (default 250).' },
  connections: { flag: 'connections', help: 'HTTP connections of the load generator per system at most (default 256).' },
  logLevel: { flag: 'log-level', help: "Both systems' log level: modelmux's processes and Ray Serve's replicas, proxy and controller (default warn)." },
  accessLog: { flag: 'access-log', help: "Ray Serve's access log on (enable_access_log); modelmux's router writes its access line at info (default false)." },
  seed: { flag: 'seed', help: 'Seed of the model sequences and arrival times (default 42).' },
  nice: {
    flag: 'nice',
    help: 'Scheduling priority of the benchmark and every system it starts (they inherit it), so other work on a shared machine delays the generator less; 0 leaves it (default -5).',
  },
  scale: { flag: 'scale', help: 'Run the scale run after the rounds (default true).' },
  scaleModels: { flag: 'scale-models', help: 'Models in the store for the scale run (default 10000).' },
  scaleModelBytes: { flag: 'scale-model-bytes', help: 'Size of each scale-run model (default 20000).' },
  scaleReplicas: { flag: 'scale-replicas', help: 'Replicas of the scale run (default 4).' },
  scaleRouters: { flag: 'scale-routers', help: 'Routers of the scale run, requests taking them in turn (default 2).' },
  scaleMaxModels: { flag: 'scale-max-models', help: 'Models per replica in the scale run (default 100).' },
  scaleRps: { flag: 'scale-rps', help: 'Open-loop rate of the scale run (default 100).' },
  scaleWarmupRequests: { flag: 'scale-warmup-requests', help: 'Unmeasured Zipf requests before the measured ones (default 2000).' },
  scaleRequests: { flag: 'scale-requests', help: 'Measured Zipf requests of the scale run (default 4000).' },
  coldSamples: { flag: 'cold-samples', help: 'Cold models asked once each, and bare GET + session samples (default 20).' },
};

interface Running {
  runner: Runner;
  url: string;
  pid: number;
  loads(): Promise<LoadStats>;
  stop(): Promise<void>;
  /** What shows the set-up was the one named: mode switches, who owns the HTTP port, listeners. */
  evidence: string[];
  listeners: Listener[];
}

interface Cell {
  round: number;
  family: Family;
  runner: Runner;
  steps: (Omit<StepResult, 'sequence'> & { loads: number; downloads: number; cpuS: number })[];
  /** First attempts of rates that failed and were tried once more (the second attempt is in steps). */
  retried: Cell['steps'];
  sustainableRps: number;
}

const log = (msg: string): void => void process.stderr.write(`[bench:mux ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

function familyRunners(family: Family, systems: readonly SystemName[]): Runner[] {
  if (family === 'own-sessions') return systems.includes('modelmux') ? ['modelmux-own'] : [];
  return [...systems];
}

async function startRunner(runner: Runner, o: Options, root: string, store: { source: string; endpoint: string; env: Record<string, string> }, workDir: string): Promise<Running> {
  const pool = {
    replicas: o.replicas,
    maxModelsPerReplica: o.maxModels,
    maxOngoingRequests: o.maxOngoingRequests,
    maxBatchSize: 1,
    batchWaitMs: 0,
    modelSource: store.source,
    s3Endpoint: store.endpoint,
  };
  if (runner === 'modelmux' || runner === 'modelmux-own') {
    const own = runner === 'modelmux-own' ? { [REPLICA_ENV.shareGraphs]: 'false', [REPLICA_ENV.mapWeights]: 'false' } : {};
    const mux = await startModelmuxLocal(root, { ...pool, port: 0, env: { ...store.env, [REPLICA_ENV.logLevel]: o.logLevel, ...NO_GRPC, ...own } });
    const tree = await treePids(mux.child.pid);
    const listeners = await listenersOf(tree);
    const flags = runner === 'modelmux-own' ? `${REPLICA_ENV.shareGraphs}=false ${REPLICA_ENV.mapWeights}=false` : 'shareGraphs and mapWeights at their defaults (true)';
    return {
      runner,
      url: mux.url,
      pid: mux.child.pid,
      loads: mux.loads,
      stop: mux.stop,
      listeners,
      evidence: [`modelmux local, ${o.replicas} replicas, ${flags}, log level ${o.logLevel}, processes at nice ${(await niceValues(tree)).join('/')}`],
    };
  }
  const mode: RayMode = runner === 'ray-haproxy' ? 'haproxy' : 'proxy';
  const [port] = await freePorts(1);
  const tempDir = `/tmp/mm-ray-${mode}-${process.pid}`;
  const cacheDir = join(workDir, `ray-${mode}-cache`);
  await rm(cacheDir, { recursive: true, force: true });
  const ray = await startRayServe(root, {
    ...pool,
    port: port as number,
    env: store.env,
    loadLog: join(workDir, `ray-${mode}-loads.log`),
    sessionOptions: 'modelmux',
    mode,
    logLevel: o.logLevel === 'warn' ? 'WARNING' : o.logLevel.toUpperCase(),
    accessLog: o.accessLog,
    cacheDir,
    tempDir,
  });
  const tree = await treePids(ray.child.pid);
  const listeners = await listenersOf(tree);
  const front = listeners.find((l) => l.port === port);
  const haproxy = listeners.filter((l) => l.program === 'haproxy');
  return {
    runner,
    url: ray.url,
    pid: ray.child.pid,
    loads: ray.loads,
    stop: async () => {
      await ray.stop();
      await rm(tempDir, { recursive: true, force: true });
    },
    listeners,
    evidence: [
      ray.modeLine,
      `port ${port} (the URL the load generator calls) is owned by ${front ? `${front.program} (pid ${front.pid}) on ${front.address}` : 'no process of the tree'}`,
      `processes at nice ${(await niceValues(tree)).join('/')}`,
      haproxy.length > 0 ? `HAProxy process in Ray's tree listening on ${haproxy.map((l) => `${l.address}:${l.port}`).join(', ')}` : "no HAProxy process in Ray's tree",
    ],
  };
}

/** After a step-up ended in overload, until the system answers one request within the limit again (or 20 s), so the next system starts on a quiet machine. */
async function drain(url: string, model: string, limitMs: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const t0 = performance.now();
    const ok = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', serve_multiplexed_model_id: model },
      body: JSON.stringify({ instances: [SAMPLE_WINE] }),
      signal: AbortSignal.timeout(5000),
    })
      .then(async (r) => (await r.arrayBuffer(), r.ok))
      .catch(() => false);
    if (ok && performance.now() - t0 <= limitMs) return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function stepUp(sys: Running, family: Family, ids: readonly string[], round: number, o: Options): Promise<Cell> {
  const ladder = rateLadder(o.startRps, o.rateFactor, o.maxRps);
  const body = JSON.stringify({ instances: [SAMPLE_WINE] });
  // The same model sequence and arrival times for every system in a round.
  const nextModel = idSampler('zipf', ids, o.seed + round);
  const pids = await treePids(sys.pid);
  const steps: Cell['steps'] = [];
  const retried: Cell['steps'] = [];
  const attempt = async (rate: number, seed: number): Promise<Cell['steps'][number]> => {
    const before = await sys.loads();
    const cpu0 = await totalCpuSeconds(pids);
    const r = await runStep({
      urls: [sys.url],
      rateRps: rate,
      warmupMs: o.stepWarmupSeconds * 1000,
      measuredMs: o.stepSeconds * 1000,
      p99LimitMs: o.p99LimitMs,
      random: seededRandom(seed),
      nextModel,
      body,
      timeoutMs: 10_000,
      connections: o.connections,
    });
    const cpuS = (await totalCpuSeconds(pids)) - cpu0;
    const after = await sys.loads();
    const { sequence, ...rest } = r;
    const sent = Math.max(1, sequence.length);
    log(
      `round ${round} ${family} ${sys.runner} ${rate} req/s: ${r.ok}/${r.requests} ok, p50 ${fmt(r.latency.p50Ms)} p99 ${fmt(r.latency.p99Ms)} ms, ` +
        `send lag p99 ${fmt(r.sendLagP99Ms)} ms${r.stoppedEarly ? ', stopped early' : ''}${r.firstFailure ? `, first failure ${r.firstFailure}` : ''}`,
    );
    return { ...rest, loads: (1000 * (after.count - before.count)) / sent, downloads: (1000 * (after.downloads - before.downloads)) / sent, cpuS };
  };
  for (const [i, rate] of ladder.entries()) {
    let step = await attempt(rate, o.seed * 1000 + round * 100 + i);
    if (!step.sustained) {
      // One stall of a shared machine can fail a step at any rate: a failed rate is tried once more, for every system alike.
      retried.push(step);
      step = await attempt(rate, o.seed * 1000 + round * 100 + 50 + i);
    }
    steps.push(step);
    if (!step.sustained) break;
  }
  await drain(sys.url, ids[0] as string, o.p99LimitMs);
  return { round, family, runner: sys.runner, steps, retried, sustainableRps: sustainableRate(steps) };
}

type TableRow = { runner: Runner; from: Family };

/** The rows of a family's table: its own runners, and for own-sessions Ray's wine cells (the same Ray serves the same files). */
function tableRunners(family: Family, systems: readonly SystemName[]): TableRow[] {
  if (family !== 'own-sessions') return systems.map((s) => ({ runner: s, from: family }));
  const own: TableRow[] = systems.includes('modelmux') ? [{ runner: 'modelmux-own', from: family }] : [];
  return [...own, ...systems.filter((s) => s !== 'modelmux').map((s): TableRow => ({ runner: s, from: 'wine' }))];
}

/** The highest ladder rate that every row sustained in at least half of its rounds: where p50/p99 are compared. */
function commonRate(cells: readonly Cell[], rows: readonly TableRow[]): number {
  let best = 0;
  const rates = new Set(cells.flatMap((c) => c.steps.map((s) => s.rateRps)));
  for (const rate of [...rates].sort((a, b) => a - b)) {
    const all = rows.every(({ runner, from }) => {
      const mine = cells.filter((c) => c.runner === runner && c.family === from);
      return mine.length > 0 && mine.filter((c) => c.sustainableRps >= rate).length * 2 >= mine.length;
    });
    if (all) best = rate;
  }
  return best;
}

function familySection(family: Family, cells: readonly Cell[], systems: readonly SystemName[]): { section: ReportSection; summary: Record<string, unknown> } {
  const rows = tableRunners(family, systems);
  const rate = commonRate(cells, rows);
  const summary: Record<string, unknown> = { family, commonRateRps: rate, rows: [] as unknown[] };
  const table = rows.map(({ runner, from }) => {
    const mine = cells.filter((c) => c.runner === runner && c.family === from);
    const ci = medianCi(mine.map((c) => c.sustainableRps));
    const at = mine.flatMap((c) => c.steps.filter((s) => s.rateRps === rate));
    const p50 = median(at.map((s) => s.latency.p50Ms));
    const p99 = median(at.map((s) => s.latency.p99Ms));
    const loads = median(at.map((s) => s.loads));
    (summary.rows as unknown[]).push({ runner, from, sustainable: ci, rounds: mine.map((c) => c.sustainableRps), p50AtCommonMs: p50, p99AtCommonMs: p99, loadsPer1000AtCommon: loads });
    return [
      `${RUNNER_LABEL[runner]}${from !== family ? ' (its wine rounds)' : ''}`,
      `${fmt(ci.median, 0)} [${fmt(ci.low, 0)}–${fmt(ci.high, 0)}]`,
      mine.map((c) => fmt(c.sustainableRps, 0)).join(', '),
      fmt(p50, 1),
      fmt(p99, 1),
      fmt(loads, 0),
    ];
  });
  const mm = rows.find((r) => r.runner.startsWith('modelmux'));
  const ratioText = ((): string => {
    if (!mm) return '';
    const med = (runner: Runner, from: Family): ReturnType<typeof medianCi> => medianCi(cells.filter((c) => c.runner === runner && c.family === from).map((c) => c.sustainableRps));
    const rays = rows.filter((r) => r.runner.startsWith('ray'));
    if (rays.length === 0) return '';
    const best = rays.map((r) => ({ r, ci: med(r.runner, r.from) })).sort((a, b) => b.ci.median - a.ci.median)[0] as { r: TableRow; ci: ReturnType<typeof medianCi> };
    const m = med(mm.runner, mm.from);
    const ratio = m.median / best.ci.median;
    const low = m.low / best.ci.high;
    const target = TARGETS[family];
    summary.ratio = { vs: best.r.runner, median: ratio, conservative: low, target };
    const verdict = target === undefined ? '(no target for this family)' : ratio >= target ? `target ≥ ${target}×: **met**` : `target ≥ ${target}×: **missed**`;
    return `${RUNNER_LABEL[mm.runner]} / ${RUNNER_LABEL[best.r.runner]} (the better Ray set-up): ${fmt(ratio, 2)}× on medians, ${fmt(low, 2)}× from modelmux's interval low over Ray's high; ${verdict}.`;
  })();
  const rounds = Math.max(0, ...rows.map(({ runner, from }) => cells.filter((c) => c.runner === runner && c.family === from).length));
  const coverage = medianCi(Array.from({ length: rounds }, (_, i) => i)).coverage;
  return {
    summary,
    section: {
      heading: FAMILY_LABEL[family],
      headline: true,
      table: {
        header: [
          'system',
          `sustainable req/s, median [CI ${fmt(coverage * 100, 1)}%]`,
          'each round',
          ...(rate > 0 ? [`p50 ms at ${rate} req/s`, `p99 ms at ${rate} req/s`] : ['p50 ms (no rate all sustain)', 'p99 ms']),
          'loads / 1000 req there',
        ],
        rows: table,
      },
      after: ratioText,
    },
  };
}

function scaleSection(s: ScaleResult): ReportSection {
  const o = s.options;
  const met = s.loadsVsIdeal <= SCALE_TARGET;
  return {
    heading: `Scale: ${o.models.toLocaleString('en')} models, ${o.replicas} replicas × ${o.maxModels} slots, ${o.routers} routers`,
    headline: true,
    text:
      `${o.models.toLocaleString('en')} wine models of ${(o.modelBytes / 1000).toFixed(0)} kB in SeaweedFS (uploaded in ${fmt(s.uploadSeconds, 0)} s); ` +
      `Zipf(1.0) at ${o.rateRps} req/s open loop, the two routers in turn; ${o.warmupRequests} requests unmeasured, then ${s.measured.requests} measured.`,
    table: {
      header: ['measure', 'value'],
      rows: [
        ['requests ok / sent', `${s.measured.ok} / ${s.measured.requests}`],
        ['p50 / p99 ms (from intended start)', `${fmt(s.measured.latency.p50Ms, 1)} / ${fmt(s.measured.latency.p99Ms, 1)}`],
        ['loads / 1000 requests', fmt(s.loadsPer1000, 1)],
        ['ideal global LRU loads / 1000 (same sequence, all slots)', fmt(s.idealLoadsPer1000, 1)],
        [`loads vs ideal (target ≤ ${SCALE_TARGET}×)`, `${fmt(s.loadsVsIdeal, 2)}× — **${met ? 'met' : 'missed'}**`],
        ['downloads from the store / 1000 requests', fmt(s.downloadsPer1000, 1)],
        [`cold first answer through a router, median / p90 ms (${s.coldFirstAnswer.count} models)`, `${fmt(s.coldFirstAnswer.p50Ms, 1)} / ${fmt(s.coldFirstAnswer.p90Ms, 1)}`],
        [`bare S3 GET + session + one run in one process, median / p90 ms (${s.bareGetPlusSession.count} models)`, `${fmt(s.bareGetPlusSession.p50Ms, 1)} / ${fmt(s.bareGetPlusSession.p90Ms, 1)}`],
      ],
    },
  };
}

/** Rounds of every (family, system) step-up in a rotated order, as many as --rounds and --round-minutes allow; answers how many ran. */
async function runRounds(
  o: Options,
  families: readonly Family[],
  systems: readonly SystemName[],
  running: ReadonlyMap<Runner, Running>,
  wineIds: readonly string[],
  dIds: readonly string[],
  cells: Cell[],
): Promise<number> {
  const order = families.flatMap((f) => familyRunners(f, systems).map((runner) => ({ family: f, runner })));
  const started = Date.now();
  let done = 0;
  for (let round = 1; round <= o.rounds; round++) {
    const elapsedMin = (Date.now() - started) / 60_000;
    const perRound = done === 0 ? 0 : elapsedMin / done;
    if (round > o.minRounds && elapsedMin + perRound > o.roundMinutes) {
      log(`stopping after ${done} rounds: another would pass --round-minutes ${o.roundMinutes}`);
      break;
    }
    for (const { family, runner } of rotated(order, round - 1)) {
      cells.push(await stepUp(running.get(runner) as Running, family, family === 'distinct' ? dIds : wineIds, round, o));
    }
    done = round;
  }
  return done;
}

function machineLoad(): string {
  const [one, five, fifteen] = loadavg().map((x) => x.toFixed(1));
  return `${one} / ${five} / ${fifteen}`;
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  const families = commaList('bench:mux', o.families, FAMILIES, 'family');
  const systems = commaList('bench:mux', o.systems, SYSTEMS, 'system');
  const root = repoRoot();
  const workDir = join(root, 'bench/results/.work');
  await mkdir(workDir, { recursive: true });
  const loadAtStart = machineLoad();
  // The generator must keep its schedule on a shared machine; the systems, started below, inherit the same priority.
  if (o.nice !== 0) setPriority(o.nice);

  const wineIds = modelIds(o.wineModels);
  const dIds = distinctIds(o.distinctModels);
  const wineDir = modelDirFor(o.modelBytes);
  await ensureModelFiles(wineDir, wineIds, o.modelBytes);
  const distinctBytes = await ensureDistinctModels(dIds);
  log(`models ready: ${wineIds.length} wine of ${o.modelBytes} bytes, ${dIds.length} distinct graphs (${(distinctBytes / 1e6).toFixed(0)} MB)`);

  const store = await openBenchStore('s3', wineDir, wineIds, log, 'bench');
  const cells: Cell[] = [];
  const evidence: Record<string, string[]> = {};
  const listeners: Record<string, Listener[]> = {};
  let scale: ScaleResult | undefined;
  let roundsRun: number;
  let loadAfterRounds: string;
  try {
    const s3 = store.s3;
    if (!s3 || !store.endpoint) throw new Error('bench:mux needs the S3 store');
    await uploadModels(distinctDir(), dIds, (k, b) => s3.put(k, b), 'bench');
    const running = new Map<Runner, Running>();
    try {
      const runners = [...new Set(families.flatMap((f) => familyRunners(f, systems)))];
      // Every system runs for the whole of the rounds; each idles while another is measured.
      for (const runner of runners) {
        log(`starting ${runner}`);
        const sys = await startRunner(runner, o, root, { source: store.source, endpoint: store.endpoint, env: store.env }, workDir);
        running.set(runner, sys);
        evidence[runner] = sys.evidence;
        listeners[runner] = sys.listeners;
        for (const f of families.filter((fam) => familyRunners(fam, systems).includes(runner))) {
          const ids = f === 'distinct' ? dIds : wineIds;
          if (f === 'distinct') await checkDistinctAnswer(sys.url, ids[ids.length - 1] as string);
          else await checkAnswer(sys.url, ids[ids.length - 1] as string, hiddenUnitsForBytes(o.modelBytes));
          // A model's first download to the machine is a cold start, paid once before any measured step.
          const pass = await everyModelOnce(sys.url, ids, 8, JSON.stringify({ instances: [SAMPLE_WINE] }));
          log(`${runner} ${f}: answers checked; first pass ${pass.ok}/${pass.requests} ok in ${(pass.elapsedMs / 1000).toFixed(1)} s`);
        }
      }
      roundsRun = await runRounds(o, families, systems, running, wineIds, dIds, cells);
    } finally {
      for (const sys of running.values()) await sys.stop();
    }
    loadAfterRounds = machineLoad();
    if (o.scale) {
      scale = await scaleRun(
        root,
        s3,
        {
          models: o.scaleModels,
          modelBytes: o.scaleModelBytes,
          replicas: o.scaleReplicas,
          routers: o.scaleRouters,
          maxModels: o.scaleMaxModels,
          maxOngoingRequests: o.maxOngoingRequests,
          rateRps: o.scaleRps,
          warmupRequests: o.scaleWarmupRequests,
          measuredRequests: o.scaleRequests,
          coldSamples: o.coldSamples,
          logLevel: o.logLevel,
          seed: o.seed,
        },
        log,
      );
    }
  } finally {
    await store.stop();
  }

  const familySections = families.map((f) => familySection(f, cells, systems));
  const offLoopback = Object.entries(listeners).flatMap(([runner, ls]) => {
    const off = ls.filter((l) => !isLoopback(l.address));
    return off.length === 0 ? [] : [`${runner}: ${off.length} sockets of ${[...new Set(off.map((l) => l.program))].join(', ')}`];
  });
  const lags = cells.flatMap((c) => c.steps.filter((st) => st.sustained).map((st) => st.sendLagP99Ms));
  const shapes = dIds.map((_, i) => distinctShape(i));
  const setup = [
    `Both systems: ${o.replicas} replicas × ${o.maxModels} models each, maxOngoingRequests ${o.maxOngoingRequests}, no batching, the same onnxruntime (1.30) with the same session options ` +
      `(1 thread, no spinning, basic graph optimisation, no pre-packing), log level ${o.logLevel} everywhere, access logs ${o.accessLog ? 'on' : 'off'} ` +
      `(Ray: logging_config on replicas, proxy and controller; modelmux: its router writes access lines at info, below ${o.logLevel}), ` +
      `one on-disk download cache per system shared by its replicas (modelmux's shared cache folder; Ray's loader keeps the files it downloads in a folder and reads them from there on later loads). ` +
      `Models in one SeaweedFS bucket on loopback: ${o.wineModels} wine MLPs of ${(o.modelBytes / 1e6).toFixed(1)} MB and ${o.distinctModels} distinct graphs of ` +
      `${fmt(Math.min(...shapes.map((s) => s.width)), 0)}–${fmt(Math.max(...shapes.map((s) => s.width)), 0)} wide (${(distinctBytes / 1e6 / o.distinctModels).toFixed(1)} MB on average). ` +
      `Every model requested once, unmeasured, before the rounds.`,
    `Load: open loop, Poisson arrivals, Zipf(1.0) over the family's models, the same seeded sequence and arrival times for every system in a round; ` +
      `rates ${o.startRps}, ×${o.rateFactor} each step up to the first rate not sustained (a failed rate is tried once more, for every system, before it counts: one stall of the shared machine fails a step at any rate); each step ${o.stepWarmupSeconds} s unmeasured then ${o.stepSeconds} s measured, ` +
      `latency from each request's intended start; a rate is sustained with no error and p99 ≤ ${o.p99LimitMs} ms. ` +
      `${roundsRun} rounds${roundsRun < o.rounds ? ` (of ${o.rounds} asked: the time budget allowed ${roundsRun})` : ''}, the order of (family, system) rotated each round; ` +
      `all systems running throughout, each idle while another is measured. Intervals: distribution-free order-statistic intervals of the median over rounds (their coverage is in the header: ${roundsRun} rounds cannot give more).`,
    `Machine load (1/5/15-minute load average, ${run.machine.nproc} cores, shared with other work): ${loadAtStart} at start, ${loadAfterRounds} after the rounds; ` +
      `the benchmark and the systems it started ran at nice ${o.nice}. The generator's own lateness (p99 of send time after intended start) over the sustained steps: median ${fmt(median(lags), 1)} ms, max ${fmt(Math.max(...lags), 1)} ms.`,
  ].join('\n\n');
  const evidenceText = [
    ...Object.entries(evidence).map(([runner, lines]) => `- ${RUNNER_LABEL[runner as Runner]}: ${lines.join('; ')}`),
    `- Listeners beyond loopback: ${offLoopback.length === 0 ? 'none' : `${offLoopback.join('; ')} (Ray core's own gRPC and agent ports, which Ray 2.60 binds to every interface with no switch to change it; every HTTP listener, HAProxy's stats and metrics included, is on 127.0.0.1; the full list is in the JSON)`}.`,
  ].join('\n');
  await writeReport(run, {
    title: 'Multiplexing: modelmux vs Ray Serve (both set-ups), open loop',
    setup,
    sections: [...familySections.map((f) => f.section), ...(scale ? [scaleSection(scale)] : []), { heading: 'Evidence of the set-ups', text: evidenceText }],
    data: { roundsRun, loadAtStart, loadAfterRounds, families: familySections.map((f) => f.summary), cells, scale, evidence, listeners },
  });
}

await runBench(
  { name: 'mux', summary: 'Multiplexing benchmark: modelmux vs Ray Serve (default proxy and HAProxy), open loop, three model families, and a 10,000-model scale run.', schema, specs },
  main,
);
