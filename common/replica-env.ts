/**
 * Environment variables of a replica: the operator writes them into the pod template, the
 * replica reads them, local mode sets them. One list so the three cannot drift.
 */
export const REPLICA_ENV = {
  host: 'MODELMUX_HOST',
  port: 'MODELMUX_PORT',
  modelSource: 'MODELMUX_MODEL_SOURCE',
  s3Endpoint: 'MODELMUX_S3_ENDPOINT',
  s3Region: 'MODELMUX_S3_REGION',
  s3ForcePathStyle: 'MODELMUX_S3_FORCE_PATH_STYLE',
  maxModels: 'MODELMUX_MAX_MODELS',
  maxModelBytes: 'MODELMUX_MAX_MODEL_BYTES',
  maxOngoingRequests: 'MODELMUX_MAX_ONGOING_REQUESTS',
  maxBatchSize: 'MODELMUX_MAX_BATCH_SIZE',
  batchWaitMs: 'MODELMUX_BATCH_WAIT_MS',
  cacheDir: 'MODELMUX_CACHE_DIR',
  executionProvider: 'MODELMUX_EXECUTION_PROVIDER',
  maxBodyBytes: 'MODELMUX_MAX_BODY_BYTES',
  maxConcurrentLoads: 'MODELMUX_MAX_CONCURRENT_LOADS',
  /** From the downward API; when both are set the replica publishes its table on its pod. */
  podName: 'POD_NAME',
  podNamespace: 'POD_NAMESPACE',
  podIp: 'POD_IP',
} as const;

/** The port every replica listens on inside its pod. */
export const REPLICA_PORT = 8080;
