import { mkdir } from 'node:fs/promises';
import type { Clock } from '../../common/clock.js';
import { ConfigError } from '../../common/config.js';
import type { Logger } from '../../common/log.js';
import { REPLICA_ENV } from '../../common/replica-env.js';
import type { ReplicaConfig } from '../config.js';
import type { ReplicaMetrics } from '../metrics.js';
import { modelFolders } from '../store/model-folders.js';
import { SidecarService } from './runtime-backend.js';
import { V2RuntimeClient } from './v2-runtime-client.js';

/** A readiness probe or index read of the runtime that takes longer fails. */
const PROBE_TIMEOUT_MS = 2000;

/** Sidecar mode's parts, from the replica's configuration; watching the runtime once started. */
export async function startSidecarService(config: ReplicaConfig & { runtimeUrl: string }, clock: Clock, log: Logger, metrics: ReplicaMetrics, onTableChange: () => void): Promise<SidecarService> {
  const modelsDir = config.runtimeModelsDir;
  if (modelsDir === undefined) throw new ConfigError('replica', [`--runtime-models-dir/${REPLICA_ENV.runtimeModelsDir}: required with --runtime-url`]);
  await mkdir(modelsDir, { recursive: true });
  const service = new SidecarService({
    folders: modelFolders({
      uri: config.modelSource,
      modelsDir,
      ...(config.maxModelBytes !== undefined ? { maxBytes: config.maxModelBytes } : {}),
      s3: {
        region: config.s3Region,
        socketTimeoutMs: config.storeTimeoutMs,
        ...(config.s3Endpoint !== undefined ? { endpoint: config.s3Endpoint } : {}),
        ...(config.s3ForcePathStyle !== undefined ? { forcePathStyle: config.s3ForcePathStyle } : {}),
      },
    }),
    runtime: new V2RuntimeClient({ url: config.runtimeUrl, loadTimeoutMs: config.runtimeLoadTimeoutMs, probeTimeoutMs: PROBE_TIMEOUT_MS }),
    maxModels: config.maxModels,
    ...(config.maxModelBytes !== undefined ? { maxModelBytes: config.maxModelBytes } : {}),
    maxConcurrentLoads: config.maxConcurrentLoads,
    cachePolicy: config.cachePolicy,
    requestTimeoutMs: config.requestTimeoutMs,
    pollMs: config.runtimePollMs,
    clock,
    log,
    metrics,
    onTableChange,
  });
  await service.start();
  return service;
}
