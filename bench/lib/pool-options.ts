/** What both systems under test are given, so the comparison is like for like. */
export interface PoolOptions {
  port: number;
  replicas: number;
  maxModelsPerReplica: number;
  maxOngoingRequests: number;
  maxBatchSize: number;
  batchWaitMs: number;
  modelSource: string;
  s3Endpoint?: string;
}

/** The flags both launchers take with the same names: `modelmux local` and bench/ray/run_ray.py. */
export function poolArgs(o: PoolOptions): string[] {
  return [
    '--replicas',
    String(o.replicas),
    '--max-models',
    String(o.maxModelsPerReplica),
    '--max-ongoing-requests',
    String(o.maxOngoingRequests),
    '--max-batch-size',
    String(o.maxBatchSize),
    '--batch-wait-ms',
    String(o.batchWaitMs),
    '--model-source',
    o.modelSource,
    ...(o.s3Endpoint ? ['--s3-endpoint', o.s3Endpoint] : []),
  ];
}
