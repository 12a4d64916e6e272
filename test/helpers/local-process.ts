import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { jsonLines } from '../../harness/modelmux-process.js';

/** A `node dist/cli/main.js local …` child (build first), up and showing its banner. */
export interface LocalProcess {
  child: ChildProcess;
  /** Resolves with the exit code once it has exited. */
  exited: Promise<number | null>;
  stdout(): string;
  stderr(): string;
  /** Its own JSON log lines on stdout (the banner and other lines skipped). */
  lines(): Record<string, unknown>[];
  /** The pool's URL from the banner's `route` line. */
  route(): string;
  /** The replicas' own URLs from the banner. */
  replicaUrls(): string[];
  /** Ctrl-C, if it is still running; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `modelmux local` (its router's gRPC and admin ports free ones unless `args` say) and waits for its banner; throws with its output when it does not come up in time. */
export async function startLocal(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<LocalProcess> {
  const child = spawn(process.execPath, [join(process.cwd(), 'dist/cli/main.js'), 'local', '--grpc-port=0', '--admin-port=0', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const deadline = Date.now() + timeoutMs;
  while (!stdout.includes('Press Ctrl-C to stop.')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`modelmux local did not come up:\n${stdout}\n${stderr}`);
    }
    await sleep(200);
  }
  return {
    child,
    exited,
    stdout: () => stdout,
    stderr: () => stderr,
    lines: () => jsonLines(stdout),
    route: () => /^\s+route\s+(\S+)$/m.exec(stdout)?.[1] ?? '',
    replicaUrls: () => (/^\s+replicas\s+(.+)$/m.exec(stdout)?.[1] ?? '').trim().split(' '),
    stop: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      return exited;
    },
  };
}
