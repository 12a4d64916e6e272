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
  loads: () => Promise<LoadStats>;
  child: Child;
  /** run_ray.py's MODE line: the switches as Serve read them. */
  modeLine: string;
  stop(): Promise<void>;
}

/**
 * Ray Serve's two HTTP set-ups: its default proxy (model-aware: it routes a multiplexed model id
 * to a replica that holds the model) and its high-throughput ingress (HAProxy in front of
 * replicas that take HTTP directly, which ignores the model id).
 */
export const RAY_MODES = ['proxy', 'haproxy'] as const;
export type RayMode = (typeof RAY_MODES)[number];

/** The environment that selects a mode; Serve reads it when it is imported, in every Ray process. */
export function rayModeEnv(mode: RayMode): Record<string, string> {
  return mode === 'haproxy' ? { RAY_SERVE_ENABLE_HA_PROXY: '1', RAY_SERVE_THROUGHPUT_OPTIMIZED: '1' } : { RAY_SERVE_ENABLE_HA_PROXY: '0', RAY_SERVE_THROUGHPUT_OPTIMIZED: '0' };
}

export interface RayServeOptions extends PoolOptions {
  /** AWS_* credentials for boto3's standard chain. */
  env?: Record<string, string>;
  loadLog: string;
  /** onnxruntime session options of the Ray replicas: modelmux's replica's, or onnxruntime's defaults. */
  sessionOptions: 'modelmux' | 'default';
  mode: RayMode;
  /** Python logging level name of Serve's replicas, proxy and controller, e.g. WARNING. */
  logLevel: string;
  accessLog: boolean;
  /** The loader's on-disk download cache (shared by the replicas); undefined downloads on every load. */
  cacheDir?: string;
  /** Ray's session folder: two clusters side by side need their own. */
  tempDir: string;
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
    '--port',
    String(o.port),
    ...poolArgs(o),
    '--load-log',
    o.loadLog,
    '--session-options',
    o.sessionOptions,
    '--log-level',
    o.logLevel,
    '--access-log',
    String(o.accessLog),
    '--temp-dir',
    o.tempDir,
    ...(o.cacheDir ? ['--cache-dir', o.cacheDir] : []),
  ];
  // bench/ray/loopback keeps HAProxy's own listeners on 127.0.0.1 (its sitecustomize.py says how).
  const pythonPath = [join(repoRoot, 'bench/ray/loopback'), process.env.PYTHONPATH].filter(Boolean).join(':');
  const child = await startChild(python, args, {
    // Ray starts its workers (replicas, proxy, HAProxy's manager) 15 nice levels below the raylet by
    // default; at 0 they share one priority with modelmux's processes on a machine shared with other work.
    env: { ...process.env, ...o.env, ...rayModeEnv(o.mode), PYTHONPATH: pythonPath, RAY_USAGE_STATS_ENABLED: '0', RAY_worker_niceness: '0' },
    ready: /READY (http:\/\/\S+)/,
    readyTimeoutMs: 240_000,
  });
  const url = child.ready[1] as string;
  return {
    url,
    child,
    modeLine: /MODE [^\n]*/.exec(child.output())?.[0] ?? 'MODE line missing',
    loads: async () => {
      const lines = (await readFile(o.loadLog, 'utf8')).split('\n').filter((l) => l.trim() !== '');
      const parsed = lines.map((l) => JSON.parse(l) as { ms?: unknown; downloaded?: unknown });
      const totalMs = parsed.reduce((sum, l) => sum + (Number(l.ms) || 0), 0);
      return { count: lines.length, totalSeconds: totalMs / 1000, downloads: parsed.filter((l) => l.downloaded !== false).length };
    },
    stop: () => child.stop(45_000),
  };
}
