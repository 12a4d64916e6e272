import type { OpenKind } from '../onnx/session-kind.js';

const MIB = 1024 ** 2;

/**
 * What a model is charged on the device before it is loaded: its weights (the file's bytes,
 * external data included), half as much again for activations and the arena rounding them up
 * (onnxruntime's CUDA arena grows by powers of two), and a floor for the per-session kernels'
 * scratch. A guess on the safe side until the load is measured; shared-graph models keep it.
 */
export function estimateDeviceBytes(fileBytes: number): number {
  return fileBytes + Math.ceil(fileBytes / 2) + 32 * MIB;
}

/**
 * The device bytes a load took, from the memory in use sampled before and after it (loads that
 * are measured run one at a time). undefined when the process had no device memory before: the
 * difference then holds the CUDA context, which the headroom covers, not the model.
 */
export function measuredDeviceBytes(before: number | undefined, after: number | undefined): number | undefined {
  if (before === undefined || after === undefined || before <= 0) return undefined;
  return Math.max(0, after - before);
}

/**
 * What a loaded model stays charged. An own session's measurement is its weights resident and
 * its arena after the warm-up run. A shared-graph model's is not its own: the first model of a
 * graph pays for the session and the next ones add nothing until runs overlap, so it keeps the
 * estimate, which counts its weights' copy for a run.
 */
export function settledDeviceBytes(kind: OpenKind, estimate: number, measured: number | undefined): number {
  return kind === 'own_session' && measured !== undefined ? measured : estimate;
}
