import { cudaStatus } from './cuda-state.js';
import { checkLibraries } from './library-load.js';
import { listGpus } from './gpu-list.js';
import type { DoctorReport } from './provider-report.js';

export type CudaDiagnosis = DoctorReport['providers']['cuda'] & { gpus: DoctorReport['gpus'] };

/**
 * The CUDA provider's state here: loads every library of `folder`, lists the GPUs, and only when
 * nothing is missing runs `probe` (a session on `cuda`), which would otherwise fail for a reason
 * already known.
 */
export async function diagnoseCuda(folder: string | undefined, probe: () => Promise<void>): Promise<CudaDiagnosis> {
  const libraries = folder === undefined ? [] : checkLibraries(folder);
  const gpus = listGpus();
  const result = libraries.length > 0 && libraries.every((l) => l.loaded) ? await tryProbe(probe) : undefined;
  const status = cudaStatus({ folder, libraries, probe: result, gpus });
  return { ...status, ...(folder !== undefined ? { folder } : {}), libraries, gpus };
}

async function tryProbe(probe: () => Promise<void>): Promise<{ ok: true } | { ok: false; error: string }> {
  try {
    await probe();
    return { ok: true };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}
