import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { parsePrometheus } from './replica-process.js';

/** A `modelmux router` child process listening on 127.0.0.1. */
export interface RouterProcess {
  url: string;
  port: number;
  logs(): string;
  /** The JSON log lines so far. */
  logLines(): Record<string, unknown>[];
  metrics(): Promise<Map<string, number>>;
  stop(graceMs?: number): Promise<number | null>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `node dist/cli/main.js router --host 127.0.0.1 --port 0 …` (build first) and waits for
 * its "router listening" line and a 200 from /readyz.
 */
export async function startRouter(args: string[], env: Record<string, string> = {}, readyTimeoutMs = 20_000): Promise<RouterProcess> {
  const child: ChildProcess = spawn(process.execPath, [join(process.cwd(), 'dist/cli/main.js'), 'router', '--host', '127.0.0.1', '--port', '0', ...args], {
    cwd: process.cwd(),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      exitCode = code;
      resolve(code);
    }),
  );
  const logLines = (): Record<string, unknown>[] =>
    output.split('\n').flatMap((l) => {
      if (!l.startsWith('{')) return [];
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  const stop = async (graceMs = 10_000): Promise<number | null> => {
    if (exitCode !== undefined) return exitCode;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    const code = await exited;
    clearTimeout(killer);
    return code;
  };
  const deadline = Date.now() + readyTimeoutMs;
  let port: number | undefined;
  while (port === undefined) {
    if (exitCode !== undefined) throw new Error(`router exited with ${exitCode} during start:\n${output}`);
    const line = logLines().find((l) => l.msg === 'router listening');
    if (line && typeof line.port === 'number') port = line.port;
    else if (Date.now() > deadline) {
      await stop(1000);
      throw new Error(`router did not start in time:\n${output}`);
    } else await sleep(50);
  }
  const url = `http://127.0.0.1:${port}`;
  while ((await fetch(`${url}/readyz`).then((r) => r.status, () => 0)) !== 200) {
    if (Date.now() > deadline) {
      await stop(1000);
      throw new Error(`router never became ready:\n${output}`);
    }
    await sleep(50);
  }
  return { url, port, logs: () => output, logLines, metrics: async () => parsePrometheus(await (await fetch(`${url}/metrics`)).text()), stop };
}
