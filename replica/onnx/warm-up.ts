import { ModelmuxError } from '../../common/errors.js';
import { parseInferBody } from '../../common/inference-body.js';
import { elementCount, type HostTensor, type TensorData, type TensorSpec, type V2Datatype } from '../../common/tensor.js';
import type { ModelSession } from './model-session.js';

/** Zeros of `count` elements of a datatype, as the replica holds them (empty strings for BYTES). */
function zeros(datatype: V2Datatype, count: number): TensorData {
  switch (datatype) {
    case 'BOOL':
    case 'UINT8':
      return new Uint8Array(count);
    case 'INT8':
      return new Int8Array(count);
    case 'INT16':
      return new Int16Array(count);
    case 'UINT16':
    case 'FP16':
    case 'BF16':
      return new Uint16Array(count);
    case 'INT32':
      return new Int32Array(count);
    case 'UINT32':
      return new Uint32Array(count);
    case 'INT64':
      return new BigInt64Array(count);
    case 'UINT64':
      return new BigUint64Array(count);
    case 'FP32':
      return new Float32Array(count);
    case 'FP64':
      return new Float64Array(count);
    case 'BYTES':
      return new Array<string>(count).fill('');
  }
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
