import { execFileSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';

/** What a results file records about where it was measured. */
export interface MachineInfo {
  date: string;
  nproc: number;
  memoryGiB: number;
  cpuModel: string;
  node: string;
  kernel: string;
  gitCommit: string;
}

function quiet(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
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
  };
}

export function machineLine(m: MachineInfo): string {
  return `${m.date} · ${m.nproc} cores (${m.cpuModel}) · ${m.memoryGiB} GiB · Linux ${m.kernel} · Node ${m.node} · commit ${m.gitCommit} (plus the working tree)`;
}
