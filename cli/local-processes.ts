import { spawn } from 'node:child_process';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

/** Child processes of `modelmux local`: start, watch, probe, stop. */

/** How a child ended: its exit code, or the signal that killed it. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Child {
  readonly name: string;
  readonly pid: number | undefined;
  readonly exited: Promise<ChildExit>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
  kill(): void;
  /** The last lines it wrote, for the error message when it dies before it is ready. */
  tail(): string[];
}

const TAIL_LINES = 20;

/** Ports free right now on 127.0.0.1; all held open together so they are distinct. */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Server>((resolve, reject) => {
          const s = createServer();
          s.once('error', reject);
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  return ports;
}

/**
 * How every line of common/log.ts and of the router's access log starts at info: a match needs
 * no parse. Under model churn a replica writes four lines per load and the router one per
 * request; parsing each took a quarter of this process's CPU (bench:mux, uniform traffic: 16 →
 * 12–13 µs per request).
 */
const INFO_LINE = /^\{"time":"[^"]*","level":"(?:info|debug)"/;

/** JSON log lines below warn are shown only with --verbose; anything else (a stack trace) always. */
export function worthShowing(line: string, verbose: boolean): boolean {
  if (verbose) return true;
  if (INFO_LINE.test(line)) return false;
  try {
    const level = (JSON.parse(line) as { level?: unknown }).level;
    return level !== 'info' && level !== 'debug';
  } catch {
    return line.trim() !== '';
  }
}

export function startChild(name: string, script: string, args: readonly string[], env: NodeJS.ProcessEnv, verbose: boolean, program: string = process.execPath): Child {
  const proc = spawn(program, [script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  for (const stream of [proc.stdout, proc.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      lines.push(line);
      if (lines.length > TAIL_LINES) lines.shift();
      if (worthShowing(line, verbose)) process.stderr.write(`[${name}] ${line}\n`);
    });
  }
  const exited = new Promise<ChildExit>((resolve) => {
    proc.once('exit', (code, signal) => resolve({ code, signal }));
    proc.once('error', (err) => {
      lines.push(String(err));
      resolve({ code: null, signal: null });
    });
  });
  return {
    name,
    pid: proc.pid,
    exited,
    kill: () => {
      proc.kill('SIGKILL');
    },
    tail: () => [...lines],
    stop: async (graceMs = 10_000) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * Polls `url` until it answers 2xx. Fails at `deadline` (epoch ms), or at once when `child`
 * exits first, with the child's last lines so the cause is on screen.
 */
export async function waitReady(url: string, deadline: number, child: Child | undefined): Promise<void> {
  let gone = false;
  void child?.exited.then(() => {
    gone = true;
  });
  for (;;) {
    if (gone) throw new Error(`${child?.name ?? url} exited before it was ready:\n${child?.tail().join('\n') ?? ''}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`${child?.name ?? url} was not ready at ${url} in time:\n${child?.tail().join('\n') ?? ''}`);
    await sleep(200);
  }
}
