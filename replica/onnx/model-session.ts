import type { OutputTensor } from '../../common/inference-body.js';
import type { HostTensor, ModelSignature } from '../../common/tensor.js';
import type { BatchPolicyOptions } from './batch-policy.js';
import type { OpenKind } from './session-kind.js';

export interface GraphWarmth {
  warm: boolean;
}

/** One loaded model: an onnxruntime session and the signature read from it. */
export interface ModelSession {
  readonly signature: ModelSignature;
  /** Every input and output has a dynamic dim 0, so requests can be stacked on it. */
  readonly batchable: boolean;
  /** How its requests are batched (its config.json); undefined: one by one. */
  readonly batching?: BatchPolicyOptions | undefined;
  /** How GraphSessions opened it: what its device memory is charged by (replica/device/). */
  readonly kind?: OpenKind | undefined;
  /**
   * A shared graph's session, as every model of that graph sees it: warm once any of them ran
   * its warm-up, so the next ones skip a run that would warm nothing (replica/onnx/warm-up.ts).
   */
  readonly graph?: GraphWarmth | undefined;
  run(inputs: readonly HostTensor[]): Promise<OutputTensor[]>;
  release(): Promise<void>;
}
