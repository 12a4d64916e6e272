import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { freePorts } from '../../cli/local-processes.js';
import { spawnManaged, type ManagedProcess } from '../../harness/process-reaper.js';

const run = promisify(execFile);

/** The MLServer venv's bin folder, installed (once per machine, ~1.5 min) by test/tools/install-mlserver.sh. */
export async function mlserverBin(): Promise<string> {
  if (process.env.MODELMUX_MLSERVER_BIN) return process.env.MODELMUX_MLSERVER_BIN;
  const { stdout } = await run('bash', [join(process.cwd(), 'test/tools/install-mlserver.sh')], { maxBuffer: 16 * 1024 * 1024, timeout: 15 * 60 * 1000 });
  const bin = stdout.trim().split('\n').pop();
  if (!bin) throw new Error('install-mlserver.sh printed no path');
  return bin;
}

/** Rows a trained model was asked about, and what the library's own predict answered. */
export interface Expected {
  rows: number[][];
  predictions: number[];
}

/**
 * Trains wine-quality models on generated data in the venv (test/fixtures/train-wine-mlserver.py),
 * each `ID:sklearn|xgboost` saved as `<dir>/<ID>/` in MLServer's layout.
 */
export async function trainWineModels(bin: string, dir: string, specs: readonly string[]): Promise<Record<string, Expected>> {
  const script = join(process.cwd(), 'test/fixtures/train-wine-mlserver.py');
  const { stdout } = await run(join(bin, 'python'), [script, dir, ...specs], { maxBuffer: 64 * 1024 * 1024, timeout: 120_000 });
  return JSON.parse(stdout) as Record<string, Expected>;
}

/** A V2 request body of FP64 rows. */
export function v2Rows(rows: readonly number[][]): string {
  return JSON.stringify({ inputs: [{ name: 'wine', datatype: 'FP64', shape: [rows.length, rows[0]?.length ?? 0], data: rows.flat() }] });
}

/** The first output's data of a V2 answer. */
export function firstOutput(body: Record<string, unknown>): number[] {
  const outputs = body['outputs'] as { data: number[] }[] | undefined;
  return outputs?.[0]?.data ?? [];
}

/** The library's predict in float64 (scikit-learn) or float32 (XGBoost), as JSON carried it. */
export function closeTo(got: readonly number[], want: readonly number[]): boolean {
  return got.length === want.length && got.every((g, i) => Math.abs(g - (want[i] ?? NaN)) < 1e-6 * Math.max(1, Math.abs(want[i] ?? 0)));
}

export interface MLServer {
  /** e.g. http://127.0.0.1:41234: the V2 HTTP address. */
  url: string;
  /** The model repository it reads, which the replica fills. */
  modelsDir: string;
  logFile: string;
  /** SIGKILL (a crash); `start()` again brings it back on the same ports. */
  kill(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * `mlserver start` in `dir` on free loopback ports (HTTP, gRPC, metrics), loading nothing at
 * start: models come and go through its repository API only, as the sidecar asks.
 */
export async function startMLServer(bin: string, dir: string, readyTimeoutMs = 60_000): Promise<MLServer> {
  const [http, grpc, metrics] = await freePorts(3);
  const modelsDir = join(dir, 'models');
  await mkdir(modelsDir, { recursive: true });
  await writeFile(
    join(dir, 'settings.json'),
    JSON.stringify({ host: '127.0.0.1', http_port: http, grpc_port: grpc, metrics_port: metrics, load_models_at_startup: false, model_repository_root: modelsDir, parallel_workers: 0 }),
  );
  const url = `http://127.0.0.1:${http}`;
  const logFile = join(dir, 'mlserver.log');
  let proc: ManagedProcess | undefined;
  const start = async (): Promise<void> => {
    proc = spawnManaged(join(bin, 'mlserver'), ['start', dir], { cwd: dir, logFile });
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      if (proc.child.exitCode !== null) throw new Error(`mlserver exited with ${proc.child.exitCode}; see ${logFile}`);
      const ok = await fetch(`${url}/v2/health/ready`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`mlserver was not ready within ${readyTimeoutMs} ms; see ${logFile}`);
      await sleep(200);
    }
  };
  await start();
  return {
    url,
    modelsDir,
    logFile,
    start,
    kill: async () => {
      proc?.child.kill('SIGKILL');
      await proc?.exited;
    },
    stop: async () => proc?.stop(10_000),
  };
}
