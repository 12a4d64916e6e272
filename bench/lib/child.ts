import { spawn, type ChildProcess } from 'node:child_process';

/**
 * A program the benchmark started, with its output kept for error messages. Stopped by its own
 * pid only (SIGTERM, then SIGKILL after a grace period): the benchmark ends nothing it did not start.
 */
export interface Child {
  proc: ChildProcess;
  pid: number;
  /** The first match of the ready pattern in stdout/stderr (empty without a pattern). */
  ready: RegExpMatchArray;
  output(): string;
  stop(graceMs?: number): Promise<void>;
}

export interface ChildOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Matched against everything the program printed so far (stdout and stderr); absent: started is enough. */
  ready?: RegExp;
  readyTimeoutMs: number;
}

export async function startChild(command: string, args: readonly string[], opts: ChildOptions): Promise<Child> {
  const proc = spawn(command, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    proc.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const stop = async (graceMs = 30_000): Promise<void> => {
    if (exited) return;
    proc.kill('SIGTERM');
    const killer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
    await exit;
    clearTimeout(killer);
  };
  const ready = await new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} not ready after ${opts.readyTimeoutMs} ms:\n${out.slice(-4000)}`)), opts.readyTimeoutMs);
    const onData = (b: Buffer): void => {
      out += b.toString();
      if (out.length > 2_000_000) out = out.slice(-1_000_000);
      const m = opts.ready ? out.match(opts.ready) : null;
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    proc.stdout?.on('data', onData);
    proc.stderr?.on('data', onData);
    if (!opts.ready) {
      clearTimeout(timer);
      resolve(Object.assign([''], { index: 0, input: '' }) as RegExpMatchArray);
    }
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${command} exited (${code ?? signal}) before it was ready:\n${out.slice(-4000)}`));
    });
  }).catch(async (err: unknown) => {
    await stop(2000);
    throw err;
  });
  if (proc.pid === undefined) throw new Error(`${command} has no pid`);
  return { proc, pid: proc.pid, ready, output: () => out, stop };
}
