import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startChild, type Child } from './child.js';
import type { LoadStats } from './load-stats.js';
import { poolArgs, type PoolOptions } from './pool-options.js';

const execFileP = promisify(execFile);

/** The Ray Serve application of bench/ray/app.py on a local Ray cluster, run by run_ray.py. */
export interface RayServe {
  url: string;
  /** Model loads so far across all replicas and their summed duration (from the app's load log). */
  loads(): Promise<LoadStats>;
  child: Child;
  stop(): Promise<void>;
}

export interface RayServeOptions extends PoolOptions {
  /** AWS_* credentials for boto3's standard chain. */
  env?: Record<string, string>;
  loadLog: string;
  /** onnxruntime session options of the Ray replicas: modelmux's replica's, or onnxruntime's defaults. */
  sessionOptions: 'modelmux' | 'default';
}

/** The bench venv's python, installed by test/tools/install-bench.sh when missing. */
export async function benchPython(repoRoot: string): Promise<string> {
  if (process.env.MODELMUX_BENCH_PYTHON) return process.env.MODELMUX_BENCH_PYTHON;
  const fixed = join(process.env.MODELMUX_CACHE ?? join(homedir(), '.cache/modelmux'), 'bench-venv/bin/python');
  const { stdout } = await execFileP('bash', [join(repoRoot, 'test/tools/install-bench.sh')], { maxBuffer: 16 << 20 }).catch(() => ({ stdout: fixed }));
  return stdout.trim().split('\n').pop() ?? fixed;
}

export async function startRayServe(repoRoot: string, o: RayServeOptions): Promise<RayServe> {
  const python = await benchPython(repoRoot);
  await writeFile(o.loadLog, '');
  const args = [
    join(repoRoot, 'bench/ray/run_ray.py'),
    '--port', String(o.port),
    ...poolArgs(o),
    '--load-log', o.loadLog,
    '--session-options', o.sessionOptions,
  ];
  const child = await startChild(python, args, {
    env: { ...process.env, ...o.env, RAY_USAGE_STATS_ENABLED: '0' },
    ready: /READY (http:\/\/\S+)/,
    readyTimeoutMs: 180_000,
  });
  const url = child.ready[1] as string;
  return {
    url,
    child,
    loads: async () => {
      const lines = (await readFile(o.loadLog, 'utf8')).split('\n').filter((l) => l.trim() !== '');
      const totalMs = lines.reduce((sum, l) => sum + (Number((JSON.parse(l) as { ms?: unknown }).ms) || 0), 0);
      // The guide's loader downloads the file on every load.
      return { count: lines.length, totalSeconds: totalMs / 1000, downloads: lines.length };
    },
    stop: () => child.stop(45_000),
  };
}
