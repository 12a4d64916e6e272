import { z } from 'zod';
import { intString, type OptionSpec } from '../../common/config.js';
import { REPLICA_ENV } from '../../common/replica-env.js';

/** Sidecar mode's options (docs/sidecar.md): set `runtimeUrl` and the replica serves through that runtime. */
export const sidecarOptionsShape = {
  runtimeUrl: z.url({ protocol: /^https?$/ }).optional(),
  runtimeModelsDir: z.string().min(1).optional(),
  runtimePollMs: intString(100, 60_000).default(1000),
  runtimeLoadTimeoutMs: intString(1000, 3_600_000).default(300_000),
};

export const sidecarOptionSpecs: Record<keyof typeof sidecarOptionsShape, OptionSpec> = {
  runtimeUrl: {
    flag: 'runtime-url',
    env: REPLICA_ENV.runtimeUrl,
    help: 'Sidecar mode: V2 HTTP address of a serving runtime beside the replica (MLServer, Triton in explicit model control), e.g. http://127.0.0.1:8081; models are folders in its layout, loaded and unloaded through its repository API (default: none, the built-in onnxruntime engine).',
  },
  runtimeModelsDir: {
    flag: 'runtime-models-dir',
    env: REPLICA_ENV.runtimeModelsDir,
    help: "Sidecar mode: the runtime's model repository folder, shared with it; each model's folder is copied into it from the store. Required with --runtime-url.",
  },
  runtimePollMs: {
    flag: 'runtime-poll-ms',
    env: REPLICA_ENV.runtimePollMs,
    help: "Sidecar mode: how often the runtime's readiness and loaded models are read; a runtime not ready makes the replica not ready and empties its table (default 1000).",
  },
  runtimeLoadTimeoutMs: {
    flag: 'runtime-load-timeout-ms',
    env: REPLICA_ENV.runtimeLoadTimeoutMs,
    help: 'Sidecar mode: how long the runtime may take to load or unload one model (default 300000).',
  },
};
