import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const MIB = 1024 ** 2;
/** nvidia-smi answers in well under a second; a hung driver must not hold a load. */
const NVIDIA_SMI_TIMEOUT_MS = 5_000;

/**
 * The device nvidia-smi should be asked about: the one onnxruntime's device 0 is. nvidia-smi does
 * not read CUDA_VISIBLE_DEVICES, so its first entry (an index or a UUID) is passed as `--id`.
 * NVIDIA_VISIBLE_DEVICES is the container runtime's: inside the container only those GPUs exist
 * and an index there is renumbered from 0, so only a UUID of it is passed on.
 */
export function nvidiaSmiDevice(env: NodeJS.ProcessEnv): string {
  const first = (list: string | undefined): string | undefined => list?.split(',')[0]?.trim() || undefined;
  const cuda = first(env.CUDA_VISIBLE_DEVICES);
  if (cuda !== undefined) return cuda;
  const nvidia = first(env.NVIDIA_VISIBLE_DEVICES);
  return nvidia !== undefined && /^(GPU|MIG)-/.test(nvidia) ? nvidia : '0';
}

/** Bytes of one `nvidia-smi --format=csv,noheader,nounits` number in MiB. */
function mib(text: string | undefined): number | undefined {
  const n = Number(text?.trim());
  return text !== undefined && text.trim() !== '' && Number.isFinite(n) && n >= 0 ? n * MIB : undefined;
}

/** `--query-gpu=memory.total` (or `memory.used`) of one device: its first line, in bytes. */
export function parseGpuMemory(csv: string): number | undefined {
  return mib(csv.split('\n')[0]);
}

/**
 * The rows of `--query-compute-apps=pid,used_memory` (`nounits`): each process and its bytes
 * (undefined where the number cannot be read). A line that is not `pid, MiB` ("No running
 * processes found") is no process.
 */
export function parseComputeApps(csv: string): { pid: number; bytes: number | undefined }[] {
  return csv.split('\n').flatMap((line) => {
    const [p, used] = line.split(',');
    return p !== undefined && /^\d+$/.test(p.trim()) ? [{ pid: Number(p.trim()), bytes: mib(used) }] : [];
  });
}

/**
 * `--query-compute-apps=pid,used_memory`: the bytes `pid` holds, 0 when it is not listed (no
 * context yet), undefined when the answer cannot be read.
 */
export function parseProcessMemory(csv: string, pid: number): number | undefined {
  const apps = parseComputeApps(csv);
  const own = apps.find((a) => a.pid === pid);
  if (own !== undefined) return own.bytes;
  return csv.trim() === '' || apps.length > 0 ? 0 : undefined;
}

/** How much device memory is in use, sampled before and after a load to measure it. */
export interface DeviceMeter {
  /** The GPU's memory, for the default budget; throws when it cannot be read. */
  total(): Promise<number>;
  /** Bytes in use now, as the meter counts them; undefined when it cannot tell. */
  used(): Promise<number | undefined>;
}

async function smi(device: string, query: string): Promise<string> {
  const { stdout } = await run('nvidia-smi', [`--id=${device}`, query, '--format=csv,noheader,nounits'], { timeout: NVIDIA_SMI_TIMEOUT_MS });
  return stdout;
}

/**
 * NVML through nvidia-smi. `used` is this process's memory on the device when nvidia-smi lists
 * it, else the whole device's: in a container nvidia-smi shows host process ids (or none), and the
 * pod owns its GPU, so the device's use is the replica's.
 */
export function nvidiaSmiMeter(env: NodeJS.ProcessEnv, pid: number): DeviceMeter {
  const device = nvidiaSmiDevice(env);
  return {
    async total() {
      const bytes = parseGpuMemory(await smi(device, '--query-gpu=memory.total'));
      if (bytes === undefined || bytes === 0) throw new Error(`nvidia-smi --id=${device} reported no memory.total`);
      return bytes;
    },
    async used() {
      try {
        const own = parseProcessMemory(await smi(device, '--query-compute-apps=pid,used_memory'), pid);
        if (own !== undefined && own > 0) return own;
        return parseGpuMemory(await smi(device, '--query-gpu=memory.used'));
      } catch {
        return undefined;
      }
    },
  };
}
