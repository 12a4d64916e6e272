import { execFileSync } from 'node:child_process';
import { parseComputeApps } from '../../replica/device/nvidia-smi.js';

/**
 * What nvidia-smi says about the GPU and a process's share of its memory. Every answer is
 * undefined where nvidia-smi is missing or fails (a machine without a GPU, the CPU dry run), so a
 * report says "absent" instead of zero.
 */

function query(args: string[]): string[] | undefined {
  try {
    const text = execFileSync('nvidia-smi', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
    return text
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.length > 0);
  } catch {
    return undefined;
  }
}

/** `NVIDIA H100 80GB HBM3, driver 580.159.04, 81559 MiB`, or undefined. */
export function gpuLine(): string | undefined {
  const rows = query(['--query-gpu=name,driver_version,memory.total', '--format=csv,noheader']);
  if (rows === undefined || rows.length === 0) return undefined;
  return rows
    .map((r) => {
      const [name, driver, memory] = r.split(',').map((x) => x.trim());
      return `${name}, driver ${driver}, ${memory}`;
    })
    .join('; ');
}

/**
 * Device bytes the process `pid` holds, by nvidia-smi's compute-apps list (MiB, so to the
 * nearest MiB): 0 while no process holds any, undefined when nvidia-smi cannot tell or lists
 * others but not `pid` (a PID namespace apart: its numbers are not ours).
 */
export function deviceBytesOfPid(pid: number): number | undefined {
  const rows = query(['--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits']);
  if (rows === undefined) return undefined;
  const apps = parseComputeApps(rows.join('\n'));
  const own = apps.filter((a) => a.pid === pid && a.bytes !== undefined);
  if (own.length === 0 && apps.length > 0) return undefined;
  return own.reduce((sum, a) => sum + (a.bytes ?? 0), 0);
}
