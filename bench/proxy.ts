import { mkdir, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { type OptionSpecs, intString } from '../common/config.js';
import { hiddenUnitsForBytes, SAMPLE_WINE } from '../common/wine-model.js';
import { freePorts } from '../cli/local-processes.js';
import { checkAnswer } from './lib/answer-check.js';
import { startChild, type Child } from './lib/child.js';
import { failureText, runLoad, type LoadResult } from './lib/load-generator.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { medianBy, rotated } from './lib/stats.js';
import { ensureModelFiles } from './lib/model-set.js';
import { replicaLoads } from './lib/modelmux-local.js';
import { startNginx } from './lib/nginx.js';
import { ROUTE, routerUrl, startBenchReplica, startBenchRouter } from './lib/proxy-targets.js';
import { totalCpuSeconds } from './lib/proc-cpu.js';
import { writeReport, type BenchReport } from './lib/report.js';

/**
 * `npm run bench:proxy`: what the router adds in front of one replica, against nginx doing the
 * same job. One replica, its hot model loaded; the same closed-loop load generator sends the
 * same request (Ray Serve form) to the replica directly, through `modelmux router` (static
 * discovery) and through Debian's nginx. CPU time of the proxy processes comes from /proc.
 * Writes bench/results/proxy.{json,md}.
 */

const schema = z.object({
  concurrency: z.string().default('1,16'),
  durationSeconds: z.coerce.number().min(1).max(3600).default(8),
  warmupSeconds: z.coerce.number().min(0).max(600).default(5),
  rounds: intString(1, 20).default(3),
  modelBytes: intString(0, 1_000_000_000).default(0),
  nginxWorkers: intString(1, 64).default(1),
  targets: z.string().default('direct,router,router-node,node-relay,nginx,nginx-work'),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  concurrency: { flag: 'concurrency', help: 'Comma list of closed-loop client counts (default 1,16: latency, then throughput).' },
  durationSeconds: { flag: 'duration-seconds', help: 'Measured seconds per target per concurrency (default 8).' },
  warmupSeconds: {
    flag: 'warmup-seconds',
    help: 'Unmeasured seconds of the same load before each row (default 5: after 1 s, V8 was still compiling the router during the measured seconds).',
  },
  rounds: {
    flag: 'rounds',
    help: "Measured rounds of every target per concurrency, the targets' order rotated each round; each table row is the target's median round by requests per proxy CPU-second (default 3: a single round of a VM can fall into a slow phase). Rounds after the first warm up for 1 s.",
  },
  modelBytes: { flag: 'model-bytes', help: 'Size of the hot model; 0 = the small example model, so proxy cost is not hidden (default 0).' },
  nginxWorkers: { flag: 'nginx-workers', help: 'nginx worker_processes (default 1, like the one router process).' },
  targets: {
    flag: 'targets',
    help: "Comma list of direct, router, router-node (the router with --fast-path false), node-relay (a Node byte relay without HTTP: the floor of a Node proxy), nginx, nginx-work (nginx doing the router's per-request work too: JSON access log, request id, X-Forwarded-For) (default all six).",
  },
};

const HOT = 'm000';
type Target = 'direct' | 'router' | 'router-node' | 'node-relay' | 'nginx' | 'nginx-work';

const PATH_NAMES: Record<Target, string> = {
  direct: 'replica directly',
  router: 'modelmux router → replica',
  'router-node': 'modelmux router, node:http reader (`--fast-path false`) → replica',
  'node-relay': 'Node byte relay, no HTTP (bench/node-relay.ts) → replica',
  nginx: 'nginx → replica',
  'nginx-work': "nginx with the router's per-request work (JSON access log, request id, X-Forwarded-For) → replica",
};

interface Row {
  target: Target;
  concurrency: number;
  /** 0-based measured round. */
  round: number;
  result: Omit<LoadResult, 'sequence'>;
  /** CPU seconds of the proxy processes during the run (0 for direct). */
  proxyCpuS: number;
  replicaCpuS: number;
}

async function measure(target: Target, url: string, concurrency: number, round: number, o: Options, proxyPids: () => Promise<number[]>, replicaPid: number): Promise<Row> {
  const body = JSON.stringify({ instances: [SAMPLE_WINE] });
  // Unmeasured load first, the same for every target: connections open, JIT done compiling
  // (in the first round; later rounds only reopen connections and warm caches).
  const warmupSeconds = round === 0 ? o.warmupSeconds : Math.min(1, o.warmupSeconds);
  if (warmupSeconds > 0) await runLoad({ url, nextModel: () => HOT, concurrency, body, durationMs: warmupSeconds * 1000, maxRequests: Number.MAX_SAFE_INTEGER });
  const pids = await proxyPids();
  const p0 = await totalCpuSeconds(pids);
  const r0 = await totalCpuSeconds([replicaPid]);
  const run = await runLoad({ url, nextModel: () => HOT, concurrency, body, durationMs: o.durationSeconds * 1000, maxRequests: Number.MAX_SAFE_INTEGER });
  const proxyCpuS = (await totalCpuSeconds(pids)) - p0;
  const replicaCpuS = (await totalCpuSeconds([replicaPid])) - r0;
  const { sequence: _s, ...result } = run;
  return { target, concurrency, round, result, proxyCpuS, replicaCpuS };
}

/** Requests per proxy CPU-second; undefined for the direct path, which has no proxy. */
function perCore(r: Row | undefined): number | undefined {
  return r && r.proxyCpuS > 0 ? r.result.ok / r.proxyCpuS : undefined;
}

/** A ratio cell of two requests-per-CPU-second figures, `n/a` when either target was not measured. */
function ratioCell(a: number | undefined, b: number | undefined): string {
  return a !== undefined && b !== undefined ? fmt(a / b, 2) : 'n/a';
}

/** Router/nginx requests per proxy CPU-second of each round, pairing the rounds by number. */
function byRound(router: readonly Row[], nginx: readonly Row[]): string {
  const ratios = router.flatMap((r) => {
    const pr = perCore(r);
    const pn = perCore(nginx.find((x) => x.round === r.round));
    return pr !== undefined && pn !== undefined ? [fmt(pr / pn, 2)] : [];
  });
  return ratios.length > 0 ? ratios.join(', ') : 'n/a';
}

function report(o: Options, rows: readonly Row[]): BenchReport {
  const levels = [...new Set(rows.map((r) => r.concurrency))];
  const rounds = (t: Target, c: number): Row[] => rows.filter((r) => r.target === t && r.concurrency === c).sort((a, b) => a.round - b.round);
  // The direct path has no proxy CPU: its median round is by throughput.
  const rank = (r: Row): number => perCore(r) ?? r.result.throughputRps;
  const get = (t: Target, c: number): Row | undefined => medianBy(rounds(t, c), rank);
  const targets = (Object.keys(PATH_NAMES) as Target[]).filter((t) => rows.some((r) => r.target === t));
  const shown = levels.flatMap((c) => targets.map((t) => get(t, c)).filter((r): r is Row => r !== undefined));
  const everyRound = (t: Target, c: number): string =>
    rounds(t, c)
      .map((r) => fmt(rank(r), 0))
      .join(', ');
  const table = {
    header: [
      'concurrency',
      'path',
      'requests',
      'errors',
      'throughput req/s',
      'p50 ms',
      'p99 ms',
      'added p50 ms',
      'added p99 ms',
      'proxy CPU s',
      'proxy CPU %',
      'req per proxy CPU-second',
      'every round (direct: req/s)',
    ],
    rows: shown.map((r) => {
      const d = get('direct', r.concurrency);
      const direct = r.target === 'direct';
      return [
        String(r.concurrency),
        PATH_NAMES[r.target],
        String(r.result.requests),
        String(r.result.requests - r.result.ok),
        fmt(r.result.throughputRps),
        fmt(r.result.latency.p50Ms, 3),
        fmt(r.result.latency.p99Ms, 3),
        direct || !d ? '–' : fmt(r.result.latency.p50Ms - d.result.latency.p50Ms, 3),
        direct || !d ? '–' : fmt(r.result.latency.p99Ms - d.result.latency.p99Ms, 3),
        direct ? '–' : fmt(r.proxyCpuS, 2),
        direct ? '–' : fmt((100 * r.proxyCpuS) / (r.result.elapsedMs / 1000), 0),
        direct ? '–' : fmt(perCore(r), 0),
        everyRound(r.target, r.concurrency),
      ];
    }),
  };
  const ratios = {
    header: [
      'concurrency',
      'router/nginx throughput',
      'router/nginx req per proxy CPU-second (target ≥ 0.5)',
      'the same, round by round',
      "router/nginx doing the router's per-request work, req per proxy CPU-second",
      'router/nginx added p50',
      'router/nginx added p99',
      'router with node:http reader/nginx req per proxy CPU-second',
      'Node byte relay/nginx req per proxy CPU-second',
    ],
    rows: levels.map((c) => {
      const r = get('router', c);
      const n = get('nginx', c);
      const d = get('direct', c);
      const pr = perCore(r);
      const pn = perCore(n);
      const prn = perCore(get('router-node', c));
      const relay = perCore(get('node-relay', c));
      const work = perCore(get('nginx-work', c));
      const ratio = pr !== undefined && pn !== undefined ? pr / pn : undefined;
      const added = (x: Row | undefined, k: 'p50Ms' | 'p99Ms'): number | undefined => (x && d ? x.result.latency[k] - d.result.latency[k] : undefined);
      const a50 = added(r, 'p50Ms');
      const n50 = added(n, 'p50Ms');
      const a99 = added(r, 'p99Ms');
      const n99 = added(n, 'p99Ms');
      return [
        String(c),
        r && n ? fmt(r.result.throughputRps / n.result.throughputRps, 2) : 'n/a',
        ratio === undefined ? 'n/a' : `${fmt(ratio, 2)} (${ratio >= 0.5 ? 'met' : '**missed**'})`,
        byRound(rounds('router', c), rounds('nginx', c)),
        ratioCell(pr, work),
        a50 !== undefined && n50 !== undefined && n50 > 0 ? fmt(a50 / n50, 2) : 'n/a',
        a99 !== undefined && n99 !== undefined && n99 > 0 ? fmt(a99 / n99, 2) : 'n/a',
        ratioCell(prn, pn),
        ratioCell(relay, pn),
      ];
    }),
  };
  return {
    title: 'Router overhead: replica directly vs modelmux router vs nginx',
    setup:
      `one \`modelmux replica\` (file store, hot model ${HOT} of ${o.modelBytes === 0 ? 'the small example size' : `${(o.modelBytes / 1e6).toFixed(1)} MB`} loaded before measuring); ` +
      `\`modelmux router --discovery static\` with that one replica (also with \`--fast-path false\`: node:http reads every request, ADR 0019); Debian nginx (${o.nginxWorkers} worker, upstream keep-alive) proxying ${ROUTE}/ to it, ` +
      "plain (no access log, no added headers: the target's reference) and doing the router's per-request work as well (a JSON access log line per request, buffered like the router's to 64 KB or 50 ms, into a file; a request id to the replica and back; X-Forwarded-For). " +
      `A Node byte relay (bench/node-relay.ts: one upstream connection per client connection, no HTTP read) as the floor of any Node proxy. ` +
      `Closed loop, one row per request in the Ray Serve form, ${o.durationSeconds} s per row after ${o.warmupSeconds} s unmeasured (1 s in later rounds); ` +
      `${o.rounds} round${o.rounds === 1 ? '' : 's'} of every target per concurrency in a rotated order, each row the target's median round by requests per proxy CPU-second (the direct path's by throughput), the ratios from those rows. ` +
      "Load generator, proxy and replica share the same cores, so absolute throughput is the machine's; " +
      '"req per proxy CPU-second" = successful requests / (user+system CPU seconds of the proxy processes from /proc), the throughput per core.',
    sections: [{ table }, { headline: true, table: ratios }],
    data: { rows },
  };
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  const levels = o.concurrency
    .split(',')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  const cli = join(repoRoot, 'dist/cli/main.js');
  const log = (msg: string): void => void process.stderr.write(`[bench:proxy ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  const modelDir = join(homedir(), '.cache/modelmux/bench-models', `proxy-${o.modelBytes}`);
  await ensureModelFiles(modelDir, [HOT], o.modelBytes);
  const work = join(repoRoot, 'bench/results/.work/proxy');
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });

  const [replicaPort, routerPort, routerNodePort, relayPort, nginxPort, nginxWorkPort] = await freePorts(6);
  const replicaUrl = `http://127.0.0.1:${replicaPort}`;
  const children: Child[] = [];
  const rows: Row[] = [];
  try {
    log('starting the replica');
    const replica = await startBenchReplica(cli, modelDir, replicaPort ?? 0);
    children.push(replica);
    const wanted = new Set(o.targets.split(',').map((s) => s.trim()));
    const targets: { target: Target; url: string; pids: () => Promise<number[]> }[] = [];
    if (wanted.has('direct')) targets.push({ target: 'direct', url: `${replicaUrl}/`, pids: () => Promise.resolve([]) });
    const startRouter = async (target: 'router' | 'router-node', port: number, extra: string[]): Promise<void> => {
      if (!wanted.has(target)) return;
      log(`starting ${target}`);
      const router = await startBenchRouter(cli, port, replicaUrl, extra);
      children.push(router);
      targets.push({ target, url: routerUrl(port), pids: () => Promise.resolve([router.pid]) });
    };
    await startRouter('router', routerPort ?? 0, []);
    await startRouter('router-node', routerNodePort ?? 0, ['--fast-path', 'false']);
    if (wanted.has('node-relay')) {
      log('starting node-relay');
      const relay = await startChild(process.execPath, [join(repoRoot, 'dist/bench/node-relay.js'), String(relayPort), String(replicaPort)], { ready: /listening/, readyTimeoutMs: 10_000 });
      children.push(relay);
      targets.push({ target: 'node-relay', url: `http://127.0.0.1:${relayPort}/`, pids: () => Promise.resolve([relay.pid]) });
    }
    const startNginxTarget = async (target: 'nginx' | 'nginx-work', port: number): Promise<void> => {
      if (!wanted.has(target)) return;
      log(`starting ${target}`);
      const nginx = await startNginx(join(work, target), port, ROUTE, `127.0.0.1:${replicaPort}`, o.nginxWorkers, target === 'nginx-work');
      children.push(nginx.child);
      targets.push({ target, url: nginx.url, pids: nginx.pids });
    };
    await startNginxTarget('nginx', nginxPort ?? 0);
    await startNginxTarget('nginx-work', nginxWorkPort ?? 0);

    // Load the hot model once, so every target measures the proxy and a warm replica.
    await runLoad({ url: `${replicaUrl}/`, nextModel: () => HOT, concurrency: 1, body: JSON.stringify({ instances: [SAMPLE_WINE] }), durationMs: 60_000, maxRequests: 5 });
    const loadsBefore = await replicaLoads([replicaUrl]);

    for (const t of targets) await checkAnswer(t.url, HOT, hiddenUnitsForBytes(o.modelBytes === 0 ? undefined : o.modelBytes));
    for (const c of levels) {
      for (let round = 0; round < o.rounds; round++) {
        for (const t of rotated(targets, round)) {
          const row = await measure(t.target, t.url, c, round, o, t.pids, replica.pid);
          rows.push(row);
          log(
            `c=${c} round ${round + 1} ${t.target}: ${row.result.throughputRps.toFixed(0)} req/s, p50 ${row.result.latency.p50Ms.toFixed(3)} ms, p99 ${row.result.latency.p99Ms.toFixed(3)} ms, ` +
              `proxy CPU ${row.proxyCpuS.toFixed(2)} s, ${failureText(row.result)}`,
          );
        }
      }
    }
    const loadsAfter = await replicaLoads([replicaUrl]);
    if (loadsAfter.count !== loadsBefore.count) log(`warning: the replica loaded ${loadsAfter.count - loadsBefore.count} models during the measurement`);
  } finally {
    for (const c of children.reverse()) await c.stop(10_000);
  }
  await writeReport(run, report(o, rows));
}

await runBench({ name: 'proxy', summary: 'Router overhead: replica directly vs modelmux router vs nginx.', schema, specs }, main);
