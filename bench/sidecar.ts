import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import { z } from 'zod';
import { intString, type OptionSpecs } from '../common/config.js';
import { freePorts } from '../cli/local-processes.js';
import { startChild, type Child } from './lib/child.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { waitHttpReady } from './lib/http-ready.js';
import { fmt } from './lib/markdown.js';
import { repoRoot, writeReport } from './lib/report.js';
import { median, summarize } from './lib/stats.js';

/**
 * `npm run bench:sidecar`: what the sidecar costs. Requests per second and latency of one
 * scikit-learn model served by MLServer, asked directly and through a replica in sidecar mode
 * (the hop), with the same closed-loop clients; and the loads of the model set, split into the
 * copy of the folder and MLServer's own load. Needs test/tools/install-mlserver.sh (run here).
 */

const run = promisify(execFile);
const ROOT = repoRoot();

const schema = z.object({
  clients: intString(1, 256).default(8),
  seconds: intString(1, 600).default(10),
  rounds: intString(1, 20).default(3),
  models: intString(1, 100).default(8),
});
type Options = z.infer<typeof schema>;

const specs: OptionSpecs<typeof schema.shape> = {
  clients: { flag: 'clients', help: 'Concurrent closed-loop clients (default 8).' },
  seconds: { flag: 'seconds', help: 'Seconds of load per path per round (default 10).' },
  rounds: { flag: 'rounds', help: 'Rounds, the two paths interleaved (default 3).' },
  models: { flag: 'models', help: 'Models trained and loaded for the load-time split (default 8).' },
};

interface PathResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

async function closedLoop(url: string, path: string, body: string, clients: number, seconds: number): Promise<PathResult> {
  const pool = new Pool(url, { connections: clients, pipelining: 1 });
  const samples: number[] = [];
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const res = await pool.request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body });
        await res.body.arrayBuffer();
        if (res.statusCode !== 200) throw new Error(`${url}${path} answered ${res.statusCode}`);
        samples.push(performance.now() - t0);
      }
    }),
  );
  await pool.close();
  const s = summarize(samples);
  return { rps: s.count / seconds, p50Ms: s.p50Ms, p99Ms: s.p99Ms };
}

async function main(bench: BenchRun<Options>): Promise<void> {
  const config = bench.options;
  const { stdout } = await run('bash', [join(ROOT, 'test/tools/install-mlserver.sh')], { maxBuffer: 16 * 1024 * 1024 });
  const bin = stdout.trim().split('\n').pop() ?? '';
  const work = await mkdtemp(join(tmpdir(), 'modelmux-bench-sidecar-'));
  const children: Child[] = [];
  try {
    const ids = Array.from({ length: config.models }, (_, i) => `wine-${i}`);
    const trained = join(work, 'store');
    const expected = JSON.parse(
      (
        await run(join(bin, 'python'), [join(ROOT, 'test/fixtures/train-wine-mlserver.py'), trained, ...ids.map((id, i) => `${id}:${i % 2 === 0 ? 'sklearn' : 'xgboost'}`)], {
          maxBuffer: 64 * 1024 * 1024,
        })
      ).stdout,
    ) as Record<string, { rows: number[][] }>;
    const [http, grpc, metrics, replicaPort] = await freePorts(4);
    const runtimeDir = join(work, 'runtime');
    await mkdir(join(runtimeDir, 'models'), { recursive: true });
    await writeFile(
      join(runtimeDir, 'settings.json'),
      JSON.stringify({
        host: '127.0.0.1',
        http_port: http,
        grpc_port: grpc,
        metrics_port: metrics,
        load_models_at_startup: false,
        model_repository_root: join(runtimeDir, 'models'),
        parallel_workers: 0,
      }),
    );
    const mlserver = await startChild(join(bin, 'mlserver'), ['start', runtimeDir], { cwd: runtimeDir, readyTimeoutMs: 5000 });
    children.push(mlserver);
    const runtimeUrl = `http://127.0.0.1:${http}`;
    await waitHttpReady(`${runtimeUrl}/v2/health/ready`, 60_000, mlserver);
    const replica = await startChild(
      process.execPath,
      [
        join(ROOT, 'dist/cli/main.js'),
        'replica',
        '--host',
        '127.0.0.1',
        '--port',
        String(replicaPort),
        '--model-source',
        `file://${trained}`,
        '--runtime-url',
        runtimeUrl,
        '--runtime-models-dir',
        join(runtimeDir, 'models'),
        '--max-models',
        String(config.models),
        '--log-level',
        'info',
      ],
      { readyTimeoutMs: 5000 },
    );
    children.push(replica);
    const replicaUrl = `http://127.0.0.1:${replicaPort}`;
    await waitHttpReady(`${replicaUrl}/v2/health/ready`, 60_000, replica);

    const bodyOf = (id: string): string => {
      const rows = expected[id]?.rows.slice(0, 1) ?? [];
      return JSON.stringify({ inputs: [{ name: 'wine', datatype: 'FP64', shape: [rows.length, 11], data: rows.flat() }] });
    };
    // Every model once through the replica: the loads whose split is reported.
    for (const id of ids) {
      const res = await fetch(`${replicaUrl}/v2/models/${id}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodyOf(id) });
      if (res.status !== 200) throw new Error(`load of ${id}: ${res.status} ${await res.text()}`);
    }

    const id = ids[0] as string;
    const path = `/v2/models/${id}/infer`;
    const direct: PathResult[] = [];
    const hop: PathResult[] = [];
    for (let round = 0; round < config.rounds; round++) {
      // Interleaved, the order alternating, so a slow stretch of the machine falls on both.
      const order = round % 2 === 0 ? (['direct', 'hop'] as const) : (['hop', 'direct'] as const);
      for (const which of order) {
        const r = await closedLoop(which === 'direct' ? runtimeUrl : replicaUrl, path, bodyOf(id), config.clients, config.seconds);
        (which === 'direct' ? direct : hop).push(r);
      }
    }
    // Read after the load phase: the replica's log lines of the last loads may still be on their way.
    const loads = replica
      .output()
      .split('\n')
      .filter((l) => l.includes('"runtime-load"'))
      .map((l) => JSON.parse(l) as { downloadMs: number; runtimeLoadMs: number });
    const med = (rs: PathResult[], k: keyof PathResult): number => median(rs.map((r) => r[k]));
    await writeReport(bench, {
      title: 'Sidecar mode over MLServer',
      setup: `One scikit-learn model (\`${id}\`, one row per request), ${config.clients} closed-loop clients, ${config.seconds} s per path, ${config.rounds} interleaved rounds (medians).`,
      sections: [
        {
          headline: true,
          table: {
            header: ['path', 'requests/s', 'p50 ms', 'p99 ms'],
            rows: [
              ['client → MLServer', fmt(med(direct, 'rps'), 0), fmt(med(direct, 'p50Ms'), 2), fmt(med(direct, 'p99Ms'), 2)],
              ['client → replica (sidecar) → MLServer', fmt(med(hop, 'rps'), 0), fmt(med(hop, 'p50Ms'), 2), fmt(med(hop, 'p99Ms'), 2)],
            ],
          },
          after: `Loads of ${loads.length} models (scikit-learn and XGBoost alternating, file store): copy of the folder median ${fmt(median(loads.map((l) => l.downloadMs)), 1)} ms, MLServer's load median ${fmt(median(loads.map((l) => l.runtimeLoadMs)), 1)} ms (first load ${fmt(loads[0]?.runtimeLoadMs, 1)} ms, importing the library).`,
        },
      ],
      data: { direct, hop, loads },
    });
  } finally {
    for (const c of children.reverse()) await c.stop(10_000);
    await rm(work, { recursive: true, force: true });
  }
}

await runBench({ name: 'sidecar', summary: 'Sidecar hop and load split over MLServer.', schema, specs }, main);
