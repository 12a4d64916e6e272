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
  /** 1-minute load average when the run started: other work on the machine shows here. */
  loadAverage1m: number;
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
    loadAverage1m: Math.round((loadavg()[0] ?? 0) * 10) / 10,
  };
}

export function machineLine(m: MachineInfo): string {
  return `${m.date} · ${m.nproc} cores (${m.cpuModel}) · ${m.memoryGiB} GiB · Linux ${m.kernel} · Node ${m.node} · commit ${m.gitCommit} (plus the working tree) · load average ${m.loadAverage1m} at start`;
}
