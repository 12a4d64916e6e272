import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

/** Parses the Prometheus text format (enough for counters, gauges and histogram series). */
export function parsePrometheus(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const [, name = '', labels = '', raw = ''] = m;
    const value = Number(raw);
    out.set(name + labels, value);
    if (labels !== '') out.set(name, (out.get(name) ?? 0) + value);
    else if (!out.has(name)) out.set(name, value);
  }
  return out;
}

/** The JSON log lines of a process's output, other lines skipped. */
export function jsonLines(output: string): Record<string, unknown>[] {
  return output.split('\n').flatMap((l) => {
    if (!l.startsWith('{')) return [];
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

/**
 * A `node dist/cli/main.js <subcommand>` child (run `npm run build` first) that logs JSON lines.
 * Its functions are closures, not methods: the router and replica handles pass them on as they are.
 */
export interface ModelmuxProcess {
  child: ChildProcess;
  pid: number;
  /** stdout+stderr so far. */
  logs: () => string;
  /** The JSON log lines so far (non-JSON lines skipped). */
  logLines: () => Record<string, unknown>[];
  /** undefined while running. */
  exitCode(): number | null | undefined;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
  stop: (graceMs?: number) => Promise<number | null>;
  /** Resolves when the process exits (for tests that signal it themselves). */
  exited: Promise<number | null>;
}

export function spawnModelmux(subcommand: string, args: readonly string[], env: Record<string, string> = {}): ModelmuxProcess {
  const child = spawn(process.execPath, [join(process.cwd(), 'dist/cli/main.js'), subcommand, ...args], {
    cwd: process.cwd(),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const onData = (b: Buffer): void => {
    output += b.toString();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  let code: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (c) => {
      code = c;
      resolve(c);
    }),
  );
  const stop = async (graceMs = 10_000): Promise<number | null> => {
    if (code !== undefined) return code;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    const c = await exited;
    clearTimeout(killer);
    return c;
  };
  return {
    child,
    pid: child.pid ?? -1,
    logs: () => output,
    logLines: () => jsonLines(output),
    exitCode: () => code,
    stop,
    exited,
  };
}

/**
 * Waits for the log line that names the listening port, then for `readyPath` to answer 200.
 * Stops the process and throws with its output when either does not happen by the deadline.
 */
export async function waitListeningAndReady(
  p: ModelmuxProcess,
  what: string,
  isListening: (line: Record<string, unknown>) => boolean,
  host: string,
  readyPath: string,
  timeoutMs: number,
  /** A port given on the command line: no listening line needed (a process above level info writes none). */
  knownPort?: number,
): Promise<{ url: string; port: number }> {
  const deadline = Date.now() + timeoutMs;
  let port = knownPort;
  while (port === undefined) {
    if (p.exitCode() !== undefined) throw new Error(`${what} exited with ${p.exitCode()} during start:\n${p.logs()}`);
    const line = p.logLines().find(isListening);
    if (line && typeof line['port'] === 'number') port = line['port'];
    else if (Date.now() > deadline) {
      await p.stop(1000);
      throw new Error(`${what} did not start in time:\n${p.logs()}`);
    } else await sleep(50);
  }
  const url = `http://${host}:${port}`;
  while (
    (await fetch(`${url}${readyPath}`).then(
      (r) => r.status,
      () => 0,
    )) !== 200
  ) {
    if (Date.now() > deadline || p.exitCode() !== undefined) {
      await p.stop(1000);
      throw new Error(`${what} never became ready:\n${p.logs()}`);
    }
    await sleep(50);
  }
  return { url, port };
}
