import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { intString, type OptionSpecs } from '../common/config.js';
import { logOptionSpecs, logOptionsShape } from '../common/log-options.js';
import { REPLICA_ENV } from '../common/replica-env.js';
import { SAMPLE_WINE } from '../common/wine-model.js';
import { openBenchStore } from './lib/bench-store.js';
import { commaList, slotList } from './lib/comma-list.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { everyModelOnce, failureText, runLoad } from './lib/load-generator.js';
import { fmt } from './lib/markdown.js';
import { ensureModelFiles, modelDirFor } from './lib/model-set.js';
import { startModelmuxLocal, type ModelmuxLocal } from './lib/modelmux-local.js';
import { totalCpuSeconds } from './lib/proc-cpu.js';
import { pairedDifference, perGroup, PROCESS_GROUPS, spreadOf, summarizeCell, totalCpuUs, type Cell, type ProcessGroup, type SpreadWindow } from './lib/spread-parts.js';
import { writeReport, type BenchReport } from './lib/report.js';
import { rotated } from './lib/stats.js';
import { idSampler, modelIds, PATTERNS, type PatternName } from './lib/traffic.js';

/**
 * `npm run bench:spread`: where bench:mux's spread across traffic patterns comes from, end to
 * end. Two modelmux local pools run side by side on one S3 store, one with bench:mux's slots and
 * one with a slot for every model (nothing loaded after the first pass), and take turns in
 * short windows of each pattern, rotated each round; each window reads every process's CPU
 * from /proc. Differences are taken round by round, so the machine's phases, which move a
 * 15 s window by 9–27%, fall on both sides alike: uniform against one-hot traffic with nothing
 * loaded is what running over weights not in the CPU's cache costs; the same pattern with few
 * slots against every slot is what its loads cost. Writes bench/results/spread.{json,md}.
 */

const schema = z.object({
  models: intString(2, 100_000).default(200),
  modelBytes: intString(1000, 1_000_000_000).default(5_000_000),
  replicas: intString(1, 64).default(2),
  // bench:mux's slots, then enough for every model on any replica whatever the placement.
  slots: slotList('8,200'),
  maxOngoingRequests: intString(1, 10_000).default(16),
  concurrency: intString(1, 10_000).default(16),
  patterns: z.string().default(PATTERNS.join(',')),
  warmupSeconds: z.coerce.number().min(0).max(600).default(1),
  seconds: z.coerce.number().min(0.5).max(600).default(3),
  rounds: intString(1, 100).default(24),
  seed: intString(0, 2 ** 31).default(42),
  modelDir: z.string().optional(),
  ...logOptionsShape,
});
type Options = z.infer<typeof schema>;

const specs: OptionSpecs<typeof schema.shape> = {
  models: { flag: 'models', help: 'Generated models in the store (default 200).' },
  modelBytes: { flag: 'model-bytes', help: 'Size of each model file in bytes (default 5000000).' },
  replicas: { flag: 'replicas', help: 'Replicas of each pool (default 2).' },
  slots: { flag: 'slots', help: "Comma list of --max-models, one pool each (default 8,200: bench:mux's, and a slot for every model)." },
  maxOngoingRequests: { flag: 'max-ongoing-requests', help: 'Per replica (default 16).' },
  concurrency: { flag: 'concurrency', help: 'Closed-loop clients, each with one request in flight (default 16).' },
  patterns: { flag: 'patterns', help: `Comma list of ${PATTERNS.join(', ')} (default all).` },
  warmupSeconds: { flag: 'warmup-seconds', help: 'Unmeasured traffic of the same pattern and pool before each window (default 1).' },
  seconds: { flag: 'seconds', help: 'Measured seconds per window (default 3).' },
  rounds: { flag: 'rounds', help: 'Rounds; each measures every pool under every pattern once, in an order rotated each round (default 24, about 13 minutes).' },
  seed: { flag: 'seed', help: 'Seed of the model sequences (default 42).' },
  modelDir: { flag: 'model-dir', help: 'Where generated models are kept between runs (default ~/.cache/modelmux/bench-models/<bytes>).' },
  ...logOptionSpecs,
};

/** The processes of a pool and its store; the load generator is this process. */
type PoolPids = Record<Exclude<ProcessGroup, 'loadGenerator'>, readonly number[]>;

interface Pool {
  slots: number;
  mux: ModelmuxLocal;
  pids: PoolPids;
}

async function cpuByGroup(pids: PoolPids): Promise<Record<ProcessGroup, number>> {
  const own = process.cpuUsage();
  return {
    replicas: await totalCpuSeconds(pids.replicas),
    router: await totalCpuSeconds(pids.router),
    local: await totalCpuSeconds(pids.local),
    store: await totalCpuSeconds(pids.store),
    loadGenerator: (own.user + own.system) / 1e6,
  };
}

async function measureWindow(o: Options, pool: Pool, pattern: PatternName, round: number, ids: readonly string[], body: string): Promise<SpreadWindow> {
  const base = { url: pool.mux.url, nextModel: idSampler(pattern, ids, o.seed + round), concurrency: o.concurrency, body, maxRequests: Number.MAX_SAFE_INTEGER };
  if (o.warmupSeconds > 0) await runLoad({ ...base, durationMs: o.warmupSeconds * 1000 });
  const loads0 = await pool.mux.loads();
  const cpu0 = await cpuByGroup(pool.pids);
  const run = await runLoad({ ...base, durationMs: o.seconds * 1000 });
  const cpu1 = await cpuByGroup(pool.pids);
  const loads1 = await pool.mux.loads();
  // A failed request is counted and shown, not fatal: the other windows of a long run still stand.
  if (run.ok < run.requests) process.stderr.write(`[bench:spread] ${pool.slots} slots, ${pattern}, round ${round}: ${failureText(run)}\n`);
  const ok = Math.max(1, run.ok);
  return {
    slots: pool.slots,
    pattern,
    round,
    throughputRps: run.throughputRps,
    failed: run.requests - run.ok,
    loadsPer1000: (1000 * (loads1.count - loads0.count)) / ok,
    cpuUs: perGroup((g) => (1e6 * (cpu1[g] - cpu0[g])) / ok),
  };
}

const GROUP_LABELS: Record<ProcessGroup, string> = {
  replicas: 'replicas',
  router: 'router',
  local: '`modelmux local`',
  store: 'store',
  loadGenerator: 'load generator',
};

function report(o: Options, slots: readonly number[], patterns: readonly PatternName[], windows: readonly SpreadWindow[]): BenchReport {
  const cells: Cell[] = slots.flatMap((s) => patterns.map((pattern) => ({ slots: s, pattern })));
  const fewest = Math.min(...slots);
  const most = Math.max(...slots);
  const pairs: { label: string; a: Cell; b: Cell }[] = [];
  if (patterns.includes('uniform') && patterns.includes('one-hot')) {
    pairs.push({
      label: `uniform against one-hot, ${most} slots (nothing loaded): the run over weights not in the CPU's cache`,
      a: { slots: most, pattern: 'uniform' },
      b: { slots: most, pattern: 'one-hot' },
    });
    if (fewest !== most) pairs.push({ label: `uniform against one-hot, ${fewest} slots (bench:mux's pool)`, a: { slots: fewest, pattern: 'uniform' }, b: { slots: fewest, pattern: 'one-hot' } });
  }
  if (fewest !== most) {
    for (const p of patterns) pairs.push({ label: `${p}, ${fewest} slots against ${most}: its loads`, a: { slots: fewest, pattern: p }, b: { slots: most, pattern: p } });
  }
  return {
    title: "The spread's parts: loads and weights out of the CPU's cache, side by side",
    setup: `${slots.length} \`modelmux local\` pools side by side (--max-models ${slots.join(' and ')}), each ${o.replicas} replicas at log level ${o.logLevel}, on one SeaweedFS S3 bucket of ${o.models} models of ${(o.modelBytes / 1e6).toFixed(1)} MB; every model asked for once per pool first; then ${o.rounds} rounds, each one window of every pool under every pattern in an order rotated each round: ${o.warmupSeconds} s unmeasured, then ${o.seconds} s measured, ${o.concurrency} clients. CPU per request from /proc of each process, the load generator being this process. Medians over rounds.`,
    sections: [
      {
        table: {
          header: ['slots', 'pattern', 'req/s', 'failed requests', 'loads / 1000', ...PROCESS_GROUPS.map((g) => `${GROUP_LABELS[g]}: CPU µs / req`), 'all: CPU µs / req'],
          rows: cells.flatMap((c) => {
            const s = summarizeCell(windows, c);
            return s ? [[String(c.slots), c.pattern, fmt(s.throughputRps, 0), String(s.failed), fmt(s.loadsPer1000, 1), ...PROCESS_GROUPS.map((g) => fmt(s.cpuUs[g], 0)), fmt(s.totalCpuUs, 0)]] : [];
          }),
        },
      },
      {
        headline: true,
        table: {
          header: ['slots', 'spread across patterns (1 − slowest / fastest median req/s)', 'slowest', 'fastest', 'by CPU (1 − cheapest / dearest median CPU µs / req)'],
          rows: slots.map((s) => {
            const sp = spreadOf(windows, s, patterns);
            return sp ? [String(s), `${fmt(sp.percent, 1)}%`, sp.slowest, sp.fastest, `${fmt(sp.cpuPercent, 1)}%`] : [String(s), 'n/a', 'n/a', 'n/a', 'n/a'];
          }),
        },
      },
      {
        text: 'Round by round (the two cells of a row measured in the same round, minutes apart at most), medians over rounds:',
        headline: true,
        table: {
          header: ['difference', 'rounds', 'req/s ratio', 'all: CPU µs / req more', ...PROCESS_GROUPS.map((g) => GROUP_LABELS[g])],
          rows: pairs.flatMap(({ label, a, b }) => {
            const d = pairedDifference(windows, a, b);
            return d ? [[label, String(d.rounds), fmt(d.throughputRatio, 3), fmt(d.totalCpuUs, 0), ...PROCESS_GROUPS.map((g) => fmt(d.cpuUs[g], 0))]] : [];
          }),
        },
      },
      {
        table: {
          header: ['round', ...cells.map((c) => `${c.pattern} @ ${c.slots}: req/s`)],
          rows: [...new Set(windows.map((w) => w.round))].map((r) => [
            String(r),
            ...cells.map((c) => fmt(windows.find((w) => w.round === r && w.slots === c.slots && w.pattern === c.pattern)?.throughputRps, 0)),
          ]),
        },
      },
    ],
    data: { windows },
  };
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  const slots = o.slots;
  const patterns = commaList('bench:spread', o.patterns, PATTERNS, 'pattern');
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  const log = (msg: string): void => void process.stderr.write(`[bench:spread ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

  const ids = modelIds(o.models);
  const modelDir = o.modelDir ?? modelDirFor(o.modelBytes);
  await ensureModelFiles(modelDir, ids, o.modelBytes);
  const body = JSON.stringify({ instances: [SAMPLE_WINE] });
  const windows: SpreadWindow[] = [];
  const store = await openBenchStore('s3', modelDir, ids, log);
  const pools: Pool[] = [];
  try {
    for (const s of slots) {
      log(`starting the pool with ${s} slots per replica`);
      const mux = await startModelmuxLocal(repoRoot, {
        port: 0,
        replicas: o.replicas,
        maxModelsPerReplica: s,
        maxOngoingRequests: o.maxOngoingRequests,
        maxBatchSize: 1,
        batchWaitMs: 0,
        modelSource: store.source,
        ...(store.endpoint ? { s3Endpoint: store.endpoint } : {}),
        env: { ...store.env, [REPLICA_ENV.logLevel]: o.logLevel },
      });
      pools.push({
        slots: s,
        mux,
        pids: { replicas: mux.replicaPids, router: mux.routerPid === undefined ? [] : [mux.routerPid], local: [mux.child.pid], store: store.pid === undefined ? [] : [store.pid] },
      });
      // Downloads and first loads are a cold start, paid before any window.
      const pass = await everyModelOnce(mux.url, ids, o.concurrency, body);
      log(`${s} slots: first pass of ${pass.requests} requests in ${(pass.elapsedMs / 1000).toFixed(1)} s, ${failureText(pass)}`);
    }
    const cells = pools.flatMap((pool) => patterns.map((pattern) => ({ pool, pattern })));
    for (let round = 1; round <= o.rounds; round++) {
      for (const { pool, pattern } of rotated(cells, round - 1)) {
        const w = await measureWindow(o, pool, pattern, round, ids, body);
        windows.push(w);
        log(`round ${round}, ${pool.slots} slots, ${pattern}: ${w.throughputRps.toFixed(0)} req/s, ${totalCpuUs(w).toFixed(0)} µs CPU per request, ${w.loadsPer1000.toFixed(0)} loads per 1000`);
      }
    }
  } finally {
    for (const pool of pools) await pool.mux.stop();
    await store.stop();
  }
  await writeReport(run, report(o, slots, patterns, windows));
}

await runBench({ name: 'spread', summary: "The spread's parts: modelmux pools with few and with every slot, side by side.", schema, specs }, main);
