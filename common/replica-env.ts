/**
 * Environment variables of a replica: the operator writes them into the pod template, the
 * replica reads them, local mode sets them. One list so the three cannot drift.
 */
export const REPLICA_ENV = {
  host: 'MODELMUX_HOST',
  port: 'MODELMUX_PORT',
  /** The Open Inference Protocol's gRPC service (docs/grpc.md); -1 serves none. */
  grpcPort: 'MODELMUX_GRPC_PORT',
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
  /** Shared by the replicas of one machine: each links the others' downloads (local mode). */
  sharedCacheDir: 'MODELMUX_SHARED_CACHE_DIR',
  executionProvider: 'MODELMUX_EXECUTION_PROVIDER',
  /** Under CUDA: device bytes the loaded models may take; default the GPU's memory less headroom. */
  deviceMemoryBytes: 'MODELMUX_DEVICE_MEMORY_BYTES',
  /** Whether a model is run once before it is listed as loaded. */
  warmup: 'MODELMUX_WARMUP',
  graphOptimization: 'MODELMUX_GRAPH_OPTIMIZATION',
  /** onnxruntime's intra-op threads of a session, unless the model's config.json sets them. */
  intraOpThreads: 'MODELMUX_INTRA_OP_THREADS',
  /** Bytes of downloaded model files kept in the cache folder after loading. */
  diskCacheBytes: 'MODELMUX_DISK_CACHE_BYTES',
  revalidateAfterMs: 'MODELMUX_REVALIDATE_AFTER_MS',
  /** Bytes of evicted models' files kept in host memory for reloads (ADR 0047); 0 keeps none. */
  hostTierBytes: 'MODELMUX_HOST_TIER_BYTES',
  /** How often a loaded model's version is checked against the store; 0 never. */
  revalidateLoadedMs: 'MODELMUX_REVALIDATE_LOADED_MS',
  revalidateLoadedPerSecond: 'MODELMUX_REVALIDATE_LOADED_PER_SECOND',
  /** S3 stores: silence on a connection to the store, in ms, that fails the request. */
  storeTimeoutMs: 'MODELMUX_STORE_TIMEOUT_MS',
  prepackWeights: 'MODELMUX_PREPACK_WEIGHTS',
  shareGraphs: 'MODELMUX_SHARE_GRAPHS',
  mapWeights: 'MODELMUX_MAP_WEIGHTS',
  maxBodyBytes: 'MODELMUX_MAX_BODY_BYTES',
  /** Connections open at once on each of the HTTP and gRPC ports. */
  maxConnections: 'MODELMUX_MAX_CONNECTIONS',
  /** gRPC messages as they arrive and answers not yet taken, all calls together. */
  grpcMaxBufferedBytes: 'MODELMUX_GRPC_MAX_BUFFERED_BYTES',
  bodyTimeoutMs: 'MODELMUX_BODY_TIMEOUT_MS',
  bodyIdleTimeoutMs: 'MODELMUX_BODY_IDLE_TIMEOUT_MS',
  writeTimeoutMs: 'MODELMUX_WRITE_TIMEOUT_MS',
  maxConcurrentLoads: 'MODELMUX_MAX_CONCURRENT_LOADS',
  cachePolicy: 'MODELMUX_CACHE_POLICY',
  /** Sidecar mode: the V2 HTTP address of the serving runtime beside the replica (docs/sidecar.md). */
  runtimeUrl: 'MODELMUX_RUNTIME_URL',
  /** Sidecar mode: the folder both containers share, where model folders are downloaded for the runtime. */
  runtimeModelsDir: 'MODELMUX_RUNTIME_MODELS_DIR',
  runtimePollMs: 'MODELMUX_RUNTIME_POLL_MS',
  runtimeLoadTimeoutMs: 'MODELMUX_RUNTIME_LOAD_TIMEOUT_MS',
  /** Deadline of one inference request (queueing, load and run), answered 504 past it. */
  requestTimeoutMs: 'MODELMUX_REQUEST_TIMEOUT_MS',
  /** Shortest gap between two patches of the pod's table annotation. */
  publishIntervalMs: 'MODELMUX_PUBLISH_INTERVAL_MS',
  /** Name in the x-modelmux-replica header and logs; POD_NAME, else host:port, when unset. */
  replicaName: 'MODELMUX_REPLICA_NAME',
  /** info, warn or error: lines below it are not written (the router and the operator read it too). */
  logLevel: 'MODELMUX_LOG_LEVEL',
  /**
   * Test hooks, never for production: `true` honours the `x-modelmux-test-delay-ms` request
   * header (an inference holds its model that long before running) and applies
   * MODELMUX_TEST_LOAD_DELAY_MS to every load, so tests can make loads and requests slow.
   */
  testHooks: 'MODELMUX_TEST_HOOKS',
  testLoadDelayMs: 'MODELMUX_TEST_LOAD_DELAY_MS',
  /** From the downward API; when both are set the replica publishes its table on its pod. */
  podName: 'POD_NAME',
  podNamespace: 'POD_NAMESPACE',
  podIp: 'POD_IP',
} as const;

/** The port every replica listens on inside its pod. */
export const REPLICA_PORT = 8080;

/**
 * The port of every replica's gRPC service inside its pod (docs/grpc.md): ModelMesh's gRPC port,
 * and none of the defaults of a sidecar runtime sharing the pod's network (its HTTP port 8081,
 * MLServer's 8080-8082, Triton's 8000-8002).
 */
export const REPLICA_GRPC_PORT = 8033;
