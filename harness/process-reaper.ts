import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';

/**
 * Children of the test process (control-plane binaries, pods run by the node agent) must not
 * outlive it, even when jest is killed with SIGKILL and no exit handler runs. Each child gets its
 * own process group, and a small watchdog process holds the list: when our end of its stdin
 * pipe closes — which the kernel does however we die — it kills every group still listed.
 */
const WATCHDOG_SOURCE = `
const groups = new Set();
const dirs = new Set();
let buf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\\n')) >= 0) {
    const line = buf.slice(0, i);
    const op = line.slice(0, 3);
    const arg = line.slice(4);
    buf = buf.slice(i + 1);
    if (op === 'add') groups.add(Number(arg));
    else if (op === 'del') groups.delete(Number(arg));
    else if (op === 'dir') dirs.add(arg);
    else if (op === 'keep') dirs.delete(arg);
  }
});
process.stdin.on('end', () => {
  for (const g of groups) { try { process.kill(-g, 'SIGKILL'); } catch {} }
  // Give the killed processes a moment to let go of their files.
  setTimeout(() => {
    for (const d of dirs) { try { require('node:fs').rmSync(d, { recursive: true, force: true }); } catch {} }
    process.exit(0);
  }, 500);
});
process.on('SIGTERM', () => undefined);
`;

let watchdog: ChildProcess | undefined;
const live = new Set<ChildProcess>();

function tell(line: string): void {
  if (!watchdog) {
    watchdog = spawn(process.execPath, ['-e', WATCHDOG_SOURCE], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
    watchdog.unref();
    // The pipe must not keep jest's event loop alive; it still closes when we exit.
    (watchdog.stdin as unknown as { unref(): void }).unref();
    watchdog.stdin?.on('error', () => undefined);
  }
  watchdog.stdin?.write(line + '\n');
}

// A normal exit (including process.exit from jest) kills the groups synchronously here, so
// nothing depends on the watchdog in the common case.
process.once('exit', () => {
  for (const child of live) killGroup(child, 'SIGKILL');
});

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * Has the watchdog remove `dir` if this process dies without cleaning up (SIGKILL, a crash).
 * Call the returned function once the folder has been removed, or is to be kept.
 */
export function removeDirOnDeath(dir: string): () => void {
  tell(`dir ${dir}`);
  return () => tell(`keep ${dir}`);
}

export interface ManagedProcess {
  readonly child: ChildProcess;
  /** Resolves with the exit code (or null after a signal) once the process has exited. */
  readonly exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the whole group is gone. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Spawns a child in its own process group, registered with the watchdog. stdout and stderr go
 * to `logFile` (appended) when given, to the caller's pipes with `pipe`, else are discarded:
 * control-plane logs are large.
 */
export function spawnManaged(command: string, args: readonly string[], options: SpawnOptions & { logFile?: string; pipe?: boolean } = {}): ManagedProcess {
  const { logFile, pipe, ...rest } = options;
  const fd = logFile === undefined ? undefined : openSync(logFile, 'a');
  const out = pipe === true ? 'pipe' : (fd ?? 'ignore');
  const child = spawn(command, args, { ...rest, detached: true, stdio: ['ignore', out, out] });
  if (fd !== undefined) closeSync(fd);
  const pid = child.pid;
  live.add(child);
  if (pid !== undefined) tell(`add ${pid}`);
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      live.delete(child);
      // Descendants of the group leader (e.g. a shell's children) go with it.
      killGroup(child, 'SIGKILL');
      if (pid !== undefined) tell(`del ${pid}`);
      resolve(code);
    });
    child.once('error', () => {
      live.delete(child);
      resolve(null);
    });
  });
  const stop = async (graceMs = 5000): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null || pid === undefined) {
      await exited;
      return;
    }
    killGroup(child, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  };
  return { child, exited, stop };
}
