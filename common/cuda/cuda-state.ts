import { DRIVER_LIBRARY, type Gpu, type LibraryCheck, type ProviderStatus } from './provider-report.js';
import { CUDA_LIBS_ENV } from './cuda-libraries.js';

export const CUDA_PROVIDER_LIBRARY = 'libonnxruntime_providers_cuda.so';

export interface CudaFacts {
  /** The configured library folder (MODELMUX_CUDA_LIBS), if any. */
  folder: string | undefined;
  libraries: readonly LibraryCheck[];
  /** A session on `cuda`, tried only once every library loaded; undefined when not tried. */
  probe: { ok: true } | { ok: false; error: string } | undefined;
  gpus: readonly Gpu[];
}

/**
 * Why the CUDA provider can or cannot run, from the first problem in load order: a library
 * missing is the install's fault, the driver missing is the node's, no device is the pod's.
 */
export function cudaStatus(facts: CudaFacts): ProviderStatus {
  if (facts.folder === undefined) {
    return {
      state: 'library_missing',
      reason: `library missing (${CUDA_PROVIDER_LIBRARY}): onnxruntime-node ships no CUDA provider; run \`npm run install:cuda\` and set ${CUDA_LIBS_ENV} to the folder it prints`,
    };
  }
  if (!facts.libraries.some((l) => l.file === CUDA_PROVIDER_LIBRARY)) {
    return { state: 'library_missing', reason: `library missing (${CUDA_PROVIDER_LIBRARY}): not in ${facts.folder}` };
  }
  const broken = facts.libraries.find((l) => !l.loaded && l.missing !== DRIVER_LIBRARY);
  if (broken !== undefined) {
    const why = broken.missing !== undefined ? `${broken.file} needs ${broken.missing}` : `${broken.file}: ${broken.error ?? 'does not load'}`;
    return { state: 'library_missing', reason: `library missing (${broken.missing ?? broken.file}): ${why}` };
  }
  if (facts.libraries.some((l) => !l.loaded)) {
    return { state: 'driver_missing', reason: `driver missing (${DRIVER_LIBRARY}): every other library loads; the NVIDIA driver of a GPU node provides it` };
  }
  if (facts.probe === undefined) return { state: 'no_device', reason: 'no device: no CUDA session was tried' };
  if (facts.probe.ok) return { state: 'ok', reason: `a CUDA session runs (${facts.gpus.length} GPU(s) visible)` };
  const seen = facts.gpus.length === 0 ? 'no GPU is visible' : `${facts.gpus.length} GPU(s) visible`;
  return { state: 'no_device', reason: `no device: the driver loads but a CUDA session fails (${seen}): ${facts.probe.error}` };
}
