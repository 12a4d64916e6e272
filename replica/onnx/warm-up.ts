import { ModelmuxError } from '../../common/errors.js';
import { parseInferBody } from '../../common/inference-body.js';
import { allocate, elementCount, type HostTensor, type TensorData, type TensorSpec, type V2Datatype } from '../../common/tensor.js';
import type { ModelSession } from './model-session.js';
import type { ExecutionProvider } from './onnx-runtime.js';
import type { ModelConfig } from '../store/model-config.js';

/** Zeros of `count` elements of a datatype, as the replica holds them (empty strings for BYTES). */
function zeros(datatype: V2Datatype, count: number): TensorData {
  return datatype === 'BYTES' ? new Array<string>(count).fill('') : allocate(datatype, count);
}

export const WARMUP_MODES = ['auto', 'true', 'false'] as const;
export type WarmupMode = (typeof WARMUP_MODES)[number];

/**
 * Whether a freshly opened model is run before the replica lists it. Under CUDA a first run
 * pays for cuDNN's algorithm search and the arena's growth, which a listed model must not leave
 * to a request. On the CPU a first run costs little more than any run, and the request that
 * asked for the load waits for it anyway, so `auto` adds no run to the CPU's load path, except
 * for a model whose config.json names its own warm-up input (a check its owner asked for). A
 * model joining a shared graph that already ran has nothing left to warm.
 */
export function warmsBeforeListing(mode: WarmupMode, provider: ExecutionProvider, configured: ModelConfig['warmup'], graphWarm: boolean): boolean {
  if (mode === 'false' || configured === false) return false;
  if (configured !== undefined) return true;
  if (graphWarm) return false;
  return mode === 'true' || provider === 'cuda';
}

/** The default warm-up input: zeros of every input's shape, a dynamic dim taken as 1. */
export function zeroInputs(inputs: readonly TensorSpec[]): HostTensor[] {
  return inputs.map((spec) => {
    const dims = spec.shape.map((d) => (d < 0 ? 1 : d));
    return { datatype: spec.datatype, dims, data: zeros(spec.datatype, elementCount(dims)) };
  });
}

/**
 * Runs a freshly opened model once before the replica lists it as loaded, so the first request
 * does not pay for what a first run does: cuDNN's algorithm choice, the arena's growth, lazy
 * kernel loading. `body` is the model's own warm-up input (config.json `warmup`, a V2 request
 * body); zeros of its input shapes without one. A failure fails the load: a model that cannot
 * run is never cached.
 */
export async function warmUp(model: ModelSession, body: unknown): Promise<void> {
  let inputs: readonly HostTensor[];
  try {
    inputs = body === undefined ? zeroInputs(model.signature.inputs) : parseInferBody(body, model.signature).inputs;
  } catch (err) {
    throw new ModelmuxError('model_load_failed', `the warm-up input of config.json does not fit the model: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  try {
    await model.run(inputs);
  } catch (err) {
    throw new ModelmuxError('model_load_failed', `the warm-up run failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}
