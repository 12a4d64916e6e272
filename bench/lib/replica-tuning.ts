import { replicaConfigSchema } from '../../replica/config.js';
import type { SessionTuning } from '../../replica/onnx/onnx-runtime.js';

/**
 * The session options a replica runs with when none are set, read from its config schema's
 * defaults, so a benchmark of the load or run path in one process measures what a replica does.
 */
export const REPLICA_TUNING: SessionTuning = {
  graphOptimization: replicaConfigSchema.shape.graphOptimization.parse(undefined),
  prepackWeights: replicaConfigSchema.shape.prepackWeights.parse(undefined),
  shareGraphs: replicaConfigSchema.shape.shareGraphs.parse(undefined),
  intraOpThreads: replicaConfigSchema.shape.intraOpThreads.parse(undefined),
  interOpThreads: 1,
};
