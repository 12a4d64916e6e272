import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Gpu } from './provider-report.js';

const NVIDIA_SMI_QUERY = ['--query-gpu=index,name,memory.total,driver_version', '--format=csv,noheader,nounits'];
const PROC_GPUS = '/proc/driver/nvidia/gpus';
/** nvidia-smi can hang on a wedged driver: the doctor must answer regardless. */
const NVIDIA_SMI_TIMEOUT_MS = 10_000;

/** nvidia-smi's CSV rows (index, name, memory MiB, driver). Pure. */
export function parseNvidiaSmi(csv: string): Gpu[] {
  return csv
    .split('\n')
    .map((line) => line.split(',').map((f) => f.trim()))
    .filter((f) => f.length >= 4 && /^\d+$/.test(f[0] ?? ''))
    .map(([index, name, memory, driver]) => {
      const memoryMiB = Number(memory);
      return {
        index: Number(index),
        name: name ?? '',
        source: 'nvidia-smi' as const,
        ...(Number.isFinite(memoryMiB) ? { memoryMiB } : {}),
        ...(driver !== undefined && driver !== '' ? { driver } : {}),
      };
    });
}

/** The `Model:` line of the kernel module's /proc/driver/nvidia/gpus/<bus>/information. Pure. */
export function parseProcInformation(index: number, text: string): Gpu {
  const model = /^Model:\s*(.+)$/m.exec(text)?.[1]?.trim();
  return { index, name: model ?? 'unknown NVIDIA GPU', source: 'proc' };
}

/** The GPUs this process can see: nvidia-smi's when it runs, else the kernel module's list, else none. */
export function listGpus(): Gpu[] {
  try {
    return parseNvidiaSmi(execFileSync('nvidia-smi', NVIDIA_SMI_QUERY, { encoding: 'utf8', timeout: NVIDIA_SMI_TIMEOUT_MS, stdio: ['ignore', 'pipe', 'ignore'] }));
  } catch {
    // No nvidia-smi in the image (the container toolkit mounts it only with the utility capability).
  }
  try {
    return readdirSync(PROC_GPUS)
      .sort()
      .map((bus, i) => parseProcInformation(i, readFileSync(join(PROC_GPUS, bus, 'information'), 'utf8')));
  } catch {
    return [];
  }
}
