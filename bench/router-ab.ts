import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ConfigError, type OptionSpecs, intString } from '../common/config.js';
import { hiddenUnitsForBytes, SAMPLE_WINE } from '../common/wine-model.js';
import { freePorts } from '../cli/local-processes.js';
import { checkAnswer } from './lib/answer-check.js';
import type { Child } from './lib/child.js';
import { runLoad, type LoadResult } from './lib/load-generator.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { ensureModelFiles } from './lib/model-set.js';
import { median } from './lib/stats.js';
import { startNginx } from './lib/nginx.js';
import { totalCpuSeconds } from './lib/proc-cpu.js';
import { ROUTE, routerUrl, startBenchReplica, startBenchRouter } from './lib/proxy-targets.js';
import { writeReport, type BenchReport } from './lib/report.js';

/**
 * `npm run bench:router-ab -- --b <other build>/dist/cli/main.js` (or `--b nginx`, `--b
 * nginx-work`): the router's CPU per request, this build (A) against another build or nginx
 * (B), both proxying to one replica under the same load at the same time. Rows of `bench:proxy`
 * taken one after the other moved with this 2-core VM's phases by 25%, more than most changes to the router; two proxies loaded side by side share every phase,
 * so their ratio shows a change of a few percent. Writes bench/results/router-ab.{json,md}.
 */

const schema = z.object({
  b: z.string().min(1, "give --b: nginx, nginx-work or another build's dist/cli/main.js"),
  bArgs: z
    .string()
    .default('')
    .transform((s) => s.split(/\s+/).filter(Boolean)),
  concurrency: intString(1, 256).default(8),
  runs: intString(1, 50).default(4),
  rows: intString(1, 100).default(6),
  rowSeconds: z.coerce.number().min(0.5).max(600).default(3),
  warmupSeconds: z.coerce.number().min(0).max(600).default(8),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  b: {
    flag: 'b',
    help: "B: another checkout's dist/cli/main.js (e.g. a `git worktree` of the base commit, built with `npx tsc`), or nginx (plain, bench:proxy's reference) or nginx-work (nginx doing the router's per-request work).",
  },
  bArgs: {
    flag: 'b-args',
    help: "B's router flags beyond the benchmark's, space-separated (a build only), e.g. --b-args=--fast-path=false with this checkout's own dist/cli/main.js as --b: what one part of the router costs.",
  },
  concurrency: { flag: 'concurrency', help: "Closed-loop clients on each proxy (default 8: 16 in all, like bench:proxy's throughput rows)." },
  runs: { flag: 'runs', help: 'Runs, each with newly started proxies: the result is the median of their median ratios (default 4).' },
  rows: { flag: 'rows', help: 'Measured rows per run (default 6).' },
  rowSeconds: { flag: 'row-seconds', help: 'Seconds per row (default 3).' },
  warmupSeconds: { flag: 'warmup-seconds', help: 'Unmeasured seconds of the same load first, for V8 to compile both routers (default 8).' },
};

const HOT = 'm000';

interface Side {
  requests: number;
  ok: number;
  cpuS: number;
  p50Ms: number;
}

interface Row {
  /** 0-based run: each run has its own pair of proxy processes. */
  run: number;
  a: Side;
  b: Side;
}

/** CPU µs per successful request. */
function cost(s: Side): number {
  return (s.cpuS * 1e6) / Math.max(1, s.ok);
}

/** B, started and ready: another build's router, or nginx. */
async function startB(b: string, bArgs: readonly string[], repoRoot: string, port: number, replicaPort: number): Promise<{ child: Child; url: string; pids: () => Promise<number[]> }> {
  if (b === 'nginx' || b === 'nginx-work') {
    const nginx = await startNginx(join(repoRoot, 'bench/results/.work/router-ab', b), port, ROUTE, `127.0.0.1:${replicaPort}`, 1, b === 'nginx-work');
    return { child: nginx.child, url: nginx.url, pids: nginx.pids };
  }
  const router = await startBenchRouter(resolve(b), port, `http://127.0.0.1:${replicaPort}`, bArgs);
  return { child: router, url: routerUrl(port), pids: () => Promise.resolve([router.pid]) };
}

/** One row: both proxies loaded at once, the CPU of each one's processes from /proc over the same seconds. */
async function measureRow(urls: readonly [string, string], pids: readonly [number[], number[]], o: Options, durationMs: number, run: number): Promise<Row> {
  const body = JSON.stringify({ instances: [SAMPLE_WINE] });
  const load = (url: string): Promise<LoadResult> => runLoad({ url, nextModel: () => HOT, concurrency: o.concurrency, body, durationMs, maxRequests: Number.MAX_SAFE_INTEGER });
  const before = await Promise.all(pids.map(totalCpuSeconds));
  const [ra, rb] = await Promise.all(urls.map(load));
  const after = await Promise.all(pids.map(totalCpuSeconds));
  const side = (r: LoadResult | undefined, i: number): Side => {
    if (r === undefined) throw new Error('a load run is missing');
    if (r.ok !== r.requests) throw new Error(`router ${i === 0 ? 'A' : 'B'}: ${r.requests - r.ok} failed requests, first: ${r.firstFailure ?? '?'}`);
    return { requests: r.requests, ok: r.ok, cpuS: (after[i] as number) - (before[i] as number), p50Ms: r.latency.p50Ms };
  };
  return { run, a: side(ra, 0), b: side(rb, 1) };
}

function describeB(b: string, bArgs: readonly string[]): string {
  if (b === 'nginx') return "Debian's nginx (1 worker, upstream keep-alive; plain, as bench:proxy's reference)";
  if (b === 'nginx-work') return "Debian's nginx doing the router's per-request work (JSON access log, request id, X-Forwarded-For; bench:proxy's nginx-work)";
  return `\`modelmux router\` from \`${b}\`${bArgs.length > 0 ? ` with \`${bArgs.join(' ')}\`` : ''}`;
}

function report(o: Options, rows: readonly Row[]): BenchReport {
  const ratio = (r: Row): number => cost(r.a) / cost(r.b);
  const runs = [...new Set(rows.map((r) => r.run))].map((run) => rows.filter((r) => r.run === run));
  const runRatios = runs.map((rs) => median(rs.map(ratio)));
  const table = {
    header: ['run', 'row', 'A requests', 'A CPU µs / request', 'B requests', 'B CPU µs / request', 'A/B CPU per request'],
    rows: rows.map((r, i) => [String(r.run + 1), String(i + 1), String(r.a.ok), fmt(cost(r.a), 1), String(r.b.ok), fmt(cost(r.b), 1), fmt(ratio(r), 3)]),
  };
  const summary = {
    header: ['run', 'A median CPU µs / request', 'B median CPU µs / request', 'A/B, median of the rows', 'rows where A costs less'],
    rows: [
      ...runs.map((rs, i) => [
        String(i + 1),
        fmt(median(rs.map((r) => cost(r.a))), 1),
        fmt(median(rs.map((r) => cost(r.b))), 1),
        fmt(runRatios[i], 3),
        `${rs.filter((r) => ratio(r) < 1).length} of ${rs.length}`,
      ]),
      [
        'all',
        fmt(median(rows.map((r) => cost(r.a))), 1),
        fmt(median(rows.map((r) => cost(r.b))), 1),
        `**${fmt(median(runRatios), 3)}** (median of the runs; runs ${fmt(Math.min(...runRatios), 3)}–${fmt(Math.max(...runRatios), 3)})`,
        `${rows.filter((r) => ratio(r) < 1).length} of ${rows.length}`,
      ],
    ],
  };
  return {
    title: 'Router A/B: CPU per request of the router and another build or nginx, under the same load at the same time',
    setup:
      `one \`modelmux replica\` (file store, hot model ${HOT} of the small example size loaded); in front of it \`modelmux router --discovery static\` from this checkout (A) and ${describeB(o.b, o.bArgs)} (B); ` +
      `${o.concurrency} closed-loop clients on each at once (one load generator process, the Ray Serve form); ${o.runs} runs, each with both proxies newly started, ${o.warmupSeconds} s unmeasured, then ${o.rows} rows of ${o.rowSeconds} s; ` +
      "CPU per request = user+system CPU of the proxy's processes from /proc over the row / its successful requests. Both share every phase of the machine, so the ratio A/B of each row is what to read, and processes differ for their whole life, so each run starts new ones; below 1, A costs less.",
    sections: [{ headline: true, table: summary }, { table }],
    data: { rows },
  };
}

async function main(bench: BenchRun<Options>): Promise<void> {
  const o = bench.options;
  if (o.bArgs.length > 0 && (o.b === 'nginx' || o.b === 'nginx-work')) throw new ConfigError('bench:router-ab', ['--b-args are router flags: give --b a build, not nginx']);
  const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
  const cliA = join(repoRoot, 'dist/cli/main.js');
  const log = (msg: string): void => void process.stderr.write(`[bench:router-ab ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  const modelDir = join(homedir(), '.cache/modelmux/bench-models', 'proxy-0');
  await ensureModelFiles(modelDir, [HOT], 0);
  const [replicaPort, portA, portB] = await freePorts(3);
  const replicaUrl = `http://127.0.0.1:${replicaPort}`;
  const rows: Row[] = [];
  const replica = await startBenchReplica(cliA, modelDir, replicaPort ?? 0);
  try {
    for (let run = 0; run < o.runs; run++) {
      // Fresh processes each run: two processes of one build differ by up to 10% for their
      // whole life on this VM, more than rows within a run do.
      log(`run ${run + 1}: starting both proxies`);
      const children: Child[] = [];
      try {
        const a = await startBenchRouter(cliA, portA ?? 0, replicaUrl);
        children.push(a);
        const b = await startB(o.b, o.bArgs, repoRoot, portB ?? 0, replicaPort ?? 0);
        children.push(b.child);
        const urls = [routerUrl(portA ?? 0), b.url] as const;
        for (const url of urls) await checkAnswer(url, HOT, hiddenUnitsForBytes(undefined));
        const pids = async (): Promise<[number[], number[]]> => [[a.pid], await b.pids()];
        if (o.warmupSeconds > 0) await measureRow(urls, await pids(), o, o.warmupSeconds * 1000, run);
        for (let i = 0; i < o.rows; i++) {
          const row = await measureRow(urls, await pids(), o, o.rowSeconds * 1000, run);
          rows.push(row);
          log(`run ${run + 1} row ${i + 1}: A ${cost(row.a).toFixed(1)} µs/request (${row.a.ok}), B ${cost(row.b).toFixed(1)} µs/request (${row.b.ok}), A/B ${(cost(row.a) / cost(row.b)).toFixed(3)}`);
        }
      } finally {
        for (const c of children.reverse()) await c.stop(10_000);
      }
    }
  } finally {
    await replica.stop(10_000);
  }
  await writeReport(bench, report(o, rows));
}

await runBench({ name: 'router-ab', summary: 'Router A/B: CPU per request of the router and another build or nginx, under the same load at the same time.', schema, specs }, main);
