import type { ExecutionProvider } from '../onnx/onnx-runtime.js';

const GIB = 1024 ** 3;

/**
 * Device memory a replica leaves unbudgeted: 10% of the GPU, at least 1 GiB. What the models'
 * accounting does not see lives there: the CUDA context and cuBLAS/cuDNN workspaces (about
 * 0.5 GiB per process on an H100), the arena's rounding of its last chunk, and the transient
 * copies of concurrent runs of shared-graph models (docs/adr/0046-device-memory-budget.md).
 */
export function deviceHeadroom(totalBytes: number): number {
  return Math.max(Math.ceil(totalBytes * 0.1), GIB);
}

/**
 * The device bytes the replica's models may take: the configured budget, else (under CUDA) the
 * GPU's memory less its headroom. undefined under cpu: models then cost host memory, bounded by
 * --max-model-bytes as before. `totalBytes` is only called when it is needed.
 */
export async function resolveDeviceBudget(provider: ExecutionProvider, configured: number | undefined, totalBytes: () => Promise<number>): Promise<number | undefined> {
  if (provider !== 'cuda') return undefined;
  if (configured !== undefined) return configured;
  const total = await totalBytes();
  return Math.max(0, total - deviceHeadroom(total));
}
