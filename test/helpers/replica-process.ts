import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

/** A `modelmux replica` child process listening on 127.0.0.1. */
export interface ReplicaProcess {
  /** e.g. `http://127.0.0.1:40123` */
  url: string;
  port: number;
  pid: number;
  /** stdout+stderr so far. */
  logs(): string;
  /** The JSON log lines so far (non-JSON lines skipped). */
  logLines(): Record<string, unknown>[];
  /** GET /metrics parsed: `name{labels}` → value, and `name` → sum over its label sets. */
  metrics(): Promise<Map<string, number>>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
  /** Resolves when the process exits (for tests that signal it themselves). */
  exited: Promise<number | null>;
}

export interface ReplicaProcessOptions {
  /** Flags after `replica`; --host/--port default to 127.0.0.1 and 0. */
  args?: string[];
  /** Added to a copy of process.env. */
  env?: Record<string, string>;
  /** Bind address (any 127.0.0.0/8 address). */
  host?: string;
  readyTimeoutMs?: number;
}

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

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `node dist/cli/main.js replica` (run `npm run build` first) and waits until
 * `/v2/health/ready` answers 200. The port is read from the replica's "listening" log line.
 */
export async function startReplica(options: ReplicaProcessOptions = {}): Promise<ReplicaProcess> {
  const host = options.host ?? '127.0.0.1';
  const args = [join(process.cwd(), 'dist/cli/main.js'), 'replica', '--host', host, '--port', '0', ...(options.args ?? [])];
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: process.cwd(),
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const onData = (b: Buffer): void => {
    output += b.toString();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => {
    exitCode = code;
    resolve(code);
  }));

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

  const deadline = Date.now() + (options.readyTimeoutMs ?? 20_000);
  let port: number | undefined;
  while (port === undefined) {
    if (exitCode !== undefined) throw new Error(`replica exited with ${exitCode} during start:\n${output}`);
    const line = logLines().find((l) => l.event === 'listening');
    if (line && typeof line.port === 'number') port = line.port;
    else if (Date.now() > deadline) {
      await stop(1000);
      throw new Error(`replica did not start in time:\n${output}`);
    } else await sleep(50);
  }
  const url = `http://${host}:${port}`;
  for (;;) {
    try {
      const r = await fetch(`${url}/v2/health/ready`);
      if (r.status === 200) break;
    } catch {
      // not yet
    }
    if (Date.now() > deadline || exitCode !== undefined) {
      await stop(1000);
      throw new Error(`replica never became ready:\n${output}`);
    }
    await sleep(50);
  }

  return {
    url,
    port,
    pid: child.pid ?? -1,
    logs: () => output,
    logLines,
    metrics: async () => parsePrometheus(await (await fetch(`${url}/metrics`)).text()),
    stop,
    exited,
  };
}
