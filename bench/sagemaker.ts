import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { intString, type OptionSpecs } from '../common/config.js';
import { freePorts } from '../cli/local-processes.js';
import { startS3Server } from '../harness/s3-server.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { startModelmuxLocal } from './lib/modelmux-local.js';
import { repoRoot, writeReport } from './lib/report.js';

/**
 * `npm run bench:sagemaker`: the SageMaker multi-model article's load test against a modelmux
 * pool. Its store (N copies of one model.tar.gz in S3, here SeaweedFS), its client's request
 * (InvokeEndpoint on the runtime API) and its load tool (Locust, headless, CSV stats) over its
 * three traffic patterns: uniform, one hot model, a few popular ones; requests per second and
 * p50/p99 per pattern, from Locust's own statistics. Needs test/tools/install-sagemaker-clients.sh
 * (run here).
 */

const run = promisify(execFile);
const ROOT = repoRoot();
const PATTERNS = ['uniform', 'one-hot', 'five-popular'] as const;
type Pattern = (typeof PATTERNS)[number];
const LABELS: Record<Pattern, string> = { uniform: 'uniform over all models', 'one-hot': 'one hot model (80%)', 'five-popular': 'five popular models (80%)' };

const schema = z.object({
  models: intString(1, 100_000).default(1000),
  replicas: intString(1, 64).default(2),
  maxModels: intString(1, 10_000).default(200),
  maxOngoingRequests: intString(1, 10_000).default(16),
  users: intString(1, 1000).default(16),
  seconds: intString(5, 3600).default(60),
});
type Options = z.infer<typeof schema>;

const specs: OptionSpecs<typeof schema.shape> = {
  models: { flag: 'models', help: 'Archives in the store, wine-<i>.tar.gz (default 1000, as the article).' },
  replicas: { flag: 'replicas', help: 'Replicas of the pool (default 2).' },
  maxModels: { flag: 'max-models', help: 'Models each replica holds loaded (default 200).' },
  maxOngoingRequests: { flag: 'max-ongoing-requests', help: 'Per replica (default 16).' },
  users: { flag: 'users', help: 'Locust users, each one request after another (default 16).' },
  seconds: { flag: 'seconds', help: 'Seconds of load per pattern (default 60).' },
};

/** One pattern's run, from Locust's aggregated statistics. */
interface PatternResult {
  pattern: Pattern;
  requests: number;
  failures: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Model loads on the replicas during the pattern. */
  loads: number;
}

/** The `Aggregated` row of Locust's `<prefix>_stats.csv`, by column name. */
function aggregatedRow(csv: string): Record<string, string> {
  const [head, ...rows] = csv.trim().split('\n');
  const names = (head ?? '').split(',');
  const row = rows.map((r) => r.split(',')).find((cells) => cells[1] === 'Aggregated');
  if (row === undefined) throw new Error('no Aggregated row in the Locust stats');
  return Object.fromEntries(names.map((n, i) => [n, row[i] ?? '']));
}

async function runPattern(bin: string, host: string, pattern: Pattern, o: Options, work: string): Promise<Omit<PatternResult, 'loads'>> {
  const prefix = join(work, pattern);
  const env = { ...process.env, MODELMUX_PATTERN: pattern, MODELMUX_MODELS: String(o.models), MODELMUX_ENDPOINT: 'wine' };
  const args = ['-f', join(ROOT, 'bench/sagemaker/locustfile.py'), '--headless', '--users', String(o.users), '--spawn-rate', String(o.users), '--run-time', `${o.seconds}s`];
  await run(join(bin, 'locust'), [...args, '--host', host, '--csv', prefix, '--only-summary', '--loglevel', 'WARNING', '--exit-code-on-error', '0'], {
    env,
    maxBuffer: 64 * 1024 * 1024,
    timeout: (o.seconds + 120) * 1000,
  });
  const r = aggregatedRow(await readFile(`${prefix}_stats.csv`, 'utf8'));
  return { pattern, requests: Number(r['Request Count']), failures: Number(r['Failure Count']), rps: Number(r['Requests/s']), p50Ms: Number(r['50%']), p99Ms: Number(r['99%']) };
}

async function main(bench: BenchRun<Options>): Promise<void> {
  const o = bench.options;
  const { stdout } = await run('bash', [join(ROOT, 'test/tools/install-sagemaker-clients.sh')], { maxBuffer: 16 * 1024 * 1024 });
  const bin = stdout.trim().split('\n').pop() ?? '';
  const work = await mkdtemp(join(tmpdir(), 'modelmux-bench-sagemaker-'));
  const s3 = await startS3Server({ bucket: 'models', startTimeoutMs: 120_000 });
  try {
    const env = { ...s3.awsEnv, MODELMUX_S3_ENDPOINT: s3.endpoint };
    await run(process.execPath, [join(ROOT, 'dist/cli/main.js'), 'models', '--out', 's3://models/mme', '--count', String(o.models), '--archives'], { env: { ...process.env, ...env } });
    const [port] = await freePorts(1);
    const pool = await startModelmuxLocal(ROOT, {
      port: port as number,
      replicas: o.replicas,
      maxModelsPerReplica: o.maxModels,
      maxOngoingRequests: o.maxOngoingRequests,
      maxBatchSize: 1,
      batchWaitMs: 0,
      modelSource: 's3://models/mme',
      s3Endpoint: s3.endpoint,
      env,
    });
    const results: PatternResult[] = [];
    try {
      const host = new URL(pool.url).origin;
      for (const pattern of PATTERNS) {
        const before = (await pool.loads()).count;
        const r = await runPattern(bin, host, pattern, o, work);
        results.push({ ...r, loads: (await pool.loads()).count - before });
        process.stderr.write(`${pattern}: ${fmt(r.rps, 0)} req/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, ${r.failures} failures\n`);
      }
    } finally {
      await pool.stop();
    }
    await writeReport(bench, {
      title: 'SageMaker multi-model load test (Locust) against a modelmux pool',
      setup:
        `The article's store: ${o.models} copies of one model.tar.gz (the wine MLP) in SeaweedFS, written by \`modelmux models --archives\`. ` +
        `\`modelmux local\`: ${o.replicas} replicas × ${o.maxModels} models each, maxOngoingRequests ${o.maxOngoingRequests}, no batching. ` +
        `Locust ${o.users} users, each one InvokeEndpoint after another (POST /endpoints/wine/invocations with X-Amzn-SageMaker-Target-Model, unsigned), ${o.seconds} s per pattern, the patterns in turn on one pool (later patterns start with what earlier ones loaded). ` +
        'Locust and the pool share the machine: its CPU is in the numbers.',
      sections: [
        {
          heading: 'Per traffic pattern',
          headline: true,
          table: {
            header: ['pattern', 'requests/s', 'p50 ms', 'p99 ms', 'requests', 'failures', 'model loads'],
            rows: results.map((r) => [LABELS[r.pattern], fmt(r.rps, 0), String(r.p50Ms), String(r.p99Ms), String(r.requests), String(r.failures), String(r.loads)]),
          },
          after: 'Latencies are Locust\'s (its percentiles are rounded to two significant digits); "model loads" counts loads on the replicas during the pattern.',
        },
      ],
      data: results,
    });
  } finally {
    await s3.stop();
    await rm(work, { recursive: true, force: true });
  }
}

void runBench({ name: 'sagemaker', summary: "The SageMaker multi-model article's Locust load test (three traffic patterns) against a modelmux pool over model.tar.gz archives.", schema, specs }, main);
