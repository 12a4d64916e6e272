import { execFileSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';

/** What a results file records about where it was measured. */
export interface MachineInfo {
  date: string;
  nproc: number;
  memoryGiB: number;
  cpuModel: string;
  node: string;
  kernel: string;
  gitCommit: string;
  /**
   * Files that differ from that commit (tracked or not; the benchmarks' own results left out),
   * undefined when git could not tell: what the run measured beyond the commit.
   */
  uncommitted: string[] | undefined;
  /** 1-minute load average when the run started: other work on the machine shows here. */
  loadAverage1m: number;
}

/** What `cmd` prints, untouched; undefined when it cannot run or fails. */
function output(cmd: string, args: string[]): string | undefined {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return undefined;
  }
}

function quiet(cmd: string, args: string[]): string {
  return output(cmd, args)?.trim() ?? 'unknown';
}

export function machineInfo(): MachineInfo {
  return {
    date: new Date().toISOString(),
    nproc: cpus().length,
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    node: process.version,
    kernel: quiet('uname', ['-r']),
    gitCommit: quiet('git', ['rev-parse', '--short', 'HEAD']),
    uncommitted: uncommittedFiles(),
    loadAverage1m: Math.round((loadavg()[0] ?? 0) * 10) / 10,
  };
}

/** The checkout's changed files, tracked or not, bench/results left out; undefined when git cannot tell. */
export function uncommittedFiles(): string[] | undefined {
  // The whole checkout whatever the working directory (`:/`); porcelain paths are from its top.
  const status = output('git', ['status', '--porcelain', '--', ':/', ':(top,exclude)bench/results']);
  // Porcelain lines are "XY path" (or "XY old -> new" for a rename): not trimmed, X may be a space.
  return status
    ?.split('\n')
    .filter((line) => line.length > 3)
    .map((line) => line.slice(3));
}

/** At most this many changed files are named in the line; the JSON has them all. */
const NAMED_CHANGES = 5;

function commitText(m: MachineInfo): string {
  const changed = m.uncommitted;
  if (changed === undefined) return `commit ${m.gitCommit} (working tree unknown)`;
  if (changed.length === 0) return `commit ${m.gitCommit}`;
  const more = changed.length > NAMED_CHANGES ? ` and ${changed.length - NAMED_CHANGES} more` : '';
  return `commit ${m.gitCommit} plus uncommitted changes to ${changed.slice(0, NAMED_CHANGES).join(', ')}${more}`;
}

export function machineLine(m: MachineInfo): string {
  return `${m.date} · ${m.nproc} cores (${m.cpuModel}) · ${m.memoryGiB} GiB · Linux ${m.kernel} · Node ${m.node} · ${commitText(m)} · load average ${m.loadAverage1m} at start`;
}
