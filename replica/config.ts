import { z } from 'zod';
import { booleanString, byteQuantityString, parseConfig, type OptionSpecs, intString } from '../common/config.js';
import { REPLICA_ENV, REPLICA_GRPC_PORT, REPLICA_PORT } from '../common/replica-env.js';
import { CACHE_POLICIES, CONCURRENT_LOADS, EXECUTION_PROVIDERS, INTRA_OP_THREADS, MAX_MODELS_PER_REPLICA, TABLE_PUBLISH_INTERVAL_MS } from '../common/resource.js';
import { logOptionSpecs, logOptionsShape } from '../common/log-options.js';
import { DEFAULT_BODY_IDLE_TIMEOUT_MS, DEFAULT_BODY_TIMEOUT_MS, DEFAULT_MAX_BODY_BYTES, DEFAULT_WRITE_TIMEOUT_MS } from '../common/request-limits.js';
import { s3OptionSpecs, s3OptionsShape } from '../common/s3-options.js';
import { GRAPH_OPTIMIZATION_LEVELS } from './onnx/onnx-runtime.js';
import { sidecarOptionSpecs, sidecarOptionsShape } from './sidecar/sidecar-options.js';

/** Connections open at once on each port: far above a pool's routers (one gRPC connection and up to --connections-per-replica HTTP ones each). */
const DEFAULT_MAX_CONNECTIONS = 4096;
/** gRPC messages and answers held at once: twice what 16 ongoing requests of 8 MiB hold. */
const DEFAULT_GRPC_MAX_BUFFERED_BYTES = 256 * 1024 * 1024;

export const replicaConfigSchema = z.object({
  host: z.string().min(1).default('0.0.0.0'),
  port: intString(0, 65535).default(REPLICA_PORT),
  grpcPort: intString(-1, 65535).default(REPLICA_GRPC_PORT),
  modelSource: z.string().regex(/^(s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?|file:\/\/\/.*)$/, 'must be s3://bucket[/prefix] or file:///dir'),
  ...s3OptionsShape,
  maxModels: intString(1, MAX_MODELS_PER_REPLICA).default(3),
  maxModelBytes: byteQuantityString.optional(),
  maxOngoingRequests: intString(1, 100000).default(16),
  maxBatchSize: intString(1, 1024).default(1),
  batchWaitMs: intString(0, 10000).default(0),
  cacheDir: z.string().min(1).optional(),
  sharedCacheDir: z.string().min(1).optional(),
  executionProvider: z.enum(EXECUTION_PROVIDERS).default('cpu'),
  deviceMemoryBytes: byteQuantityString.optional(),
  warmup: booleanString.default(true),
  graphOptimization: z.enum(GRAPH_OPTIMIZATION_LEVELS).default('basic'),
  intraOpThreads: intString(INTRA_OP_THREADS.min, INTRA_OP_THREADS.max).default(INTRA_OP_THREADS.default),
  diskCacheBytes: byteQuantityString.default(2 * 1024 ** 3),
  revalidateAfterMs: intString(0, 86_400_000).default(60_000),
  hostTierBytes: byteQuantityString.default(0),
  revalidateLoadedMs: intString(0, 86_400_000).default(60_000),
  revalidateLoadedPerSecond: intString(1, 1000).default(10),
  storeTimeoutMs: intString(100, 600_000).default(10_000),
  prepackWeights: booleanString.default(false),
  shareGraphs: booleanString.default(true),
  mapWeights: booleanString.default(true),
  maxBodyBytes: byteQuantityString.default(DEFAULT_MAX_BODY_BYTES),
  maxConnections: intString(0, 10_000_000).default(DEFAULT_MAX_CONNECTIONS),
  grpcMaxBufferedBytes: byteQuantityString.pipe(z.number().int().positive()).default(DEFAULT_GRPC_MAX_BUFFERED_BYTES),
  bodyTimeoutMs: intString(1, 3_600_000).default(DEFAULT_BODY_TIMEOUT_MS),
  bodyIdleTimeoutMs: intString(1, 3_600_000).default(DEFAULT_BODY_IDLE_TIMEOUT_MS),
  writeTimeoutMs: intString(1, 3_600_000).default(DEFAULT_WRITE_TIMEOUT_MS),
  maxConcurrentLoads: intString(CONCURRENT_LOADS.min, CONCURRENT_LOADS.max).default(CONCURRENT_LOADS.default),
  cachePolicy: z.enum(CACHE_POLICIES).default('frequency'),
  requestTimeoutMs: intString(1, 3_600_000).default(60_000),
  publishIntervalMs: intString(0, TABLE_PUBLISH_INTERVAL_MS.max).default(TABLE_PUBLISH_INTERVAL_MS.default),
  replicaName: z.string().min(1).max(253).optional(),
  ...sidecarOptionsShape,
  ...logOptionsShape,
  podName: z.string().min(1).max(253).optional(),
  podNamespace: z.string().min(1).max(63).optional(),
  podIp: z.string().min(1).optional(),
  testHooks: booleanString.default(false),
  testLoadDelayMs: intString(0, 600_000).default(0),
});

export type ReplicaConfig = z.infer<typeof replicaConfigSchema>;

const specs: OptionSpecs<typeof replicaConfigSchema.shape> = {
  host: { flag: 'host', env: REPLICA_ENV.host, help: 'Address to listen on (default 0.0.0.0).' },
  port: { flag: 'port', env: REPLICA_ENV.port, help: `Port to listen on; 0 picks a free one (default ${REPLICA_PORT}).` },
  grpcPort: {
    flag: 'grpc-port',
    env: REPLICA_ENV.grpcPort,
    help: `Port of the Open Inference Protocol's gRPC service (inference.GRPCInferenceService, docs/grpc.md) on --host; 0 picks a free one, -1 serves no gRPC (default ${REPLICA_GRPC_PORT}).`,
  },
  modelSource: { flag: 'model-source', env: REPLICA_ENV.modelSource, help: 'Model store: s3://bucket/prefix or file:///dir; model ID lives at <source>/<ID>/model.onnx. Required.' },
  ...s3OptionSpecs,
  maxModels: { flag: 'max-models', env: REPLICA_ENV.maxModels, help: 'Models kept loaded at most (LRU; default 3).' },
  maxModelBytes: { flag: 'max-model-bytes', env: REPLICA_ENV.maxModelBytes, help: 'Optional bound on the bytes of loaded model files, e.g. 4Gi.' },
  maxOngoingRequests: { flag: 'max-ongoing-requests', env: REPLICA_ENV.maxOngoingRequests, help: 'Inference requests in progress at most; past it 503 overloaded at once (default 16).' },
  maxBatchSize: {
    flag: 'max-batch-size',
    env: REPLICA_ENV.maxBatchSize,
    help: 'Requests of one model run as one batch at most, for models whose config.json turns batching on and names no size (default 1: such models get 8); other models are never batched.',
  },
  batchWaitMs: {
    flag: 'batch-wait-ms',
    env: REPLICA_ENV.batchWaitMs,
    help: 'How long the first request of a batch waits for others, for models whose config.json turns batching on and names no wait (default 0).',
  },
  cacheDir: { flag: 'cache-dir', env: REPLICA_ENV.cacheDir, help: 'Folder for downloaded model files (default: a temp folder).' },
  sharedCacheDir: {
    flag: 'shared-cache-dir',
    env: REPLICA_ENV.sharedCacheDir,
    help: 'S3 stores: a folder shared by the replicas of one machine, on the filesystem of --cache-dir; a model one of them downloaded is hard-linked from its folder instead of downloaded again (default: none; local mode sets one).',
  },
  executionProvider: { flag: 'execution-provider', env: REPLICA_ENV.executionProvider, help: 'cpu or cuda (default cpu); cuda fails at start when absent.' },
  deviceMemoryBytes: {
    flag: 'device-memory-bytes',
    env: REPLICA_ENV.deviceMemoryBytes,
    help: "cuda only: device memory the loaded models may take, e.g. 70Gi; a load evicts least recently used models until its estimate fits, and a model larger than it is refused (default: the GPU's memory less 10%, at least 1 GiB, read with nvidia-smi).",
  },
  warmup: {
    flag: 'warmup',
    env: REPLICA_ENV.warmup,
    help: "Run each model once, on its config.json's warmup input or zeros of its input shapes, before it is listed as loaded; a failing run fails the load (default true).",
  },
  intraOpThreads: {
    flag: 'intra-op-threads',
    env: REPLICA_ENV.intraOpThreads,
    help: `Threads one run of a model may use (onnxruntime's intra-op threads), unless its config.json says otherwise; more makes large models faster at one request, at the cost of the others' cores (default ${INTRA_OP_THREADS.default}).`,
  },
  graphOptimization: {
    flag: 'graph-optimization',
    env: REPLICA_ENV.graphOptimization,
    help: 'onnxruntime graph optimisation: disabled, basic, extended or all (default basic: fast session creation).',
  },
  revalidateAfterMs: {
    flag: 'revalidate-after-ms',
    env: REPLICA_ENV.revalidateAfterMs,
    help: 'A file in the disk cache that the store confirmed (ETag) less than this long ago is reloaded without asking it again; 0 asks on every reload (default 60000).',
  },
  hostTierBytes: {
    flag: 'host-tier-bytes',
    env: REPLICA_ENV.hostTierBytes,
    help: "Bytes of evicted models' files kept in host memory, so reloading one reads no file and, within --revalidate-after-ms, asks the store nothing; revalidated like the disk cache. Counts against the container's memory; most useful with --execution-provider cuda, where loaded models live on the GPU (default 0: none).",
  },
  revalidateLoadedMs: {
    flag: 'revalidate-loaded-ms',
    env: REPLICA_ENV.revalidateLoadedMs,
    help: "How often each loaded model's version (ETag) is checked against the store; a changed model is loaded beside the old one and swapped in, requests in flight finishing on the old one. 0 never checks (default 60000).",
  },
  revalidateLoadedPerSecond: {
    flag: 'revalidate-loaded-per-second',
    env: REPLICA_ENV.revalidateLoadedPerSecond,
    help: 'Version checks of loaded models sent to the store per second at most; more loaded models than the interval allows are checked less often (default 10).',
  },
  storeTimeoutMs: {
    flag: 'store-timeout-ms',
    env: REPLICA_ENV.storeTimeoutMs,
    help: 'S3 stores: a request whose connection stays silent this long fails and is tried once more, so a hung store fails a load with 503 store_unavailable instead of holding it (default 10000).',
  },
  prepackWeights: { flag: 'prepack-weights', env: REPLICA_ENV.prepackWeights, help: 'Let onnxruntime pre-pack weights at session creation: faster large-batch runs, 4x slower loads (default false).' },
  shareGraphs: {
    flag: 'share-graphs',
    env: REPLICA_ENV.shareGraphs,
    help: 'Models with the same graph share one onnxruntime session, their float weights fed as inputs: a load reads the file and creates no session; one-row runs of a graph with a one-column Gemm weight use a faster variant of it (default true).',
  },
  mapWeights: {
    flag: 'map-weights',
    env: REPLICA_ENV.mapWeights,
    help: 'S3 stores, shared graphs: downloads are rewritten once with their weights aligned, and a load maps the file instead of reading it: no copy of the weights per load (default true; needs dist/native/file-map.node, else files are read).',
  },
  diskCacheBytes: {
    flag: 'disk-cache-bytes',
    env: REPLICA_ENV.diskCacheBytes,
    help: 'S3 stores: bytes of downloaded model files kept in --cache-dir for reloads, revalidated by ETag; 0 keeps none (default 2Gi).',
  },
  maxBodyBytes: {
    flag: 'max-body-bytes',
    env: REPLICA_ENV.maxBodyBytes,
    help: 'Largest request body or gRPC request message; larger gets 413 body_too_large (gRPC: RESOURCE_EXHAUSTED). The router has the same flag and default (default 8Mi).',
  },
  maxConnections: {
    flag: 'max-connections',
    env: REPLICA_ENV.maxConnections,
    help: `Connections open at once on the HTTP port, and on the gRPC port; past it a new one is closed at once (0: no limit; default ${DEFAULT_MAX_CONNECTIONS}).`,
  },
  grpcMaxBufferedBytes: {
    flag: 'grpc-max-buffered-bytes',
    env: REPLICA_ENV.grpcMaxBufferedBytes,
    help: 'gRPC request messages (counted as they arrive) and answers its clients have not taken, all calls together; past it RESOURCE_EXHAUSTED buffer_full (default 256Mi).',
  },
  bodyTimeoutMs: {
    flag: 'body-timeout-ms',
    env: REPLICA_ENV.bodyTimeoutMs,
    help: 'A gRPC request message must be whole this long after its call opened; past it DEADLINE_EXCEEDED request_timeout (default 120000).',
  },
  bodyIdleTimeoutMs: {
    flag: 'body-idle-timeout-ms',
    env: REPLICA_ENV.bodyIdleTimeoutMs,
    help: 'Longest gap between two bytes of a gRPC request message; past it DEADLINE_EXCEEDED request_timeout (default 30000).',
  },
  writeTimeoutMs: { flag: 'write-timeout-ms', env: REPLICA_ENV.writeTimeoutMs, help: 'A gRPC answer whose bytes make no progress to its client this long is reset (default 30000).' },
  maxConcurrentLoads: { flag: 'max-concurrent-loads', env: REPLICA_ENV.maxConcurrentLoads, help: 'Loads of different models running at the same time at most (default 2).' },
  cachePolicy: {
    flag: 'cache-policy',
    env: REPLICA_ENV.cachePolicy,
    help: "Which loaded models stay: lru (Ray Serve's) or frequency (default: a model enters a full cache only if asked for at least as often lately as the one it would evict).",
  },
  requestTimeoutMs: { flag: 'request-timeout-ms', env: REPLICA_ENV.requestTimeoutMs, help: 'Deadline of one inference request, including its load; 504 past it (default 60000).' },
  publishIntervalMs: {
    flag: 'publish-interval-ms',
    env: REPLICA_ENV.publishIntervalMs,
    help: 'Shortest gap between two patches of the pod annotation: about one patch a second however fast models churn; routers cover the gap with what they sent where (default 1000).',
  },
  ...sidecarOptionSpecs,
  replicaName: { flag: 'replica-name', env: REPLICA_ENV.replicaName, help: 'Name in x-modelmux-replica and logs (default: POD_NAME, else host:port).' },
  ...logOptionSpecs,
  podName: { flag: 'pod-name', env: REPLICA_ENV.podName, help: 'Own pod name (downward API); with the namespace, enables table publication.' },
  podNamespace: { flag: 'pod-namespace', env: REPLICA_ENV.podNamespace, help: 'Own pod namespace (downward API).' },
  podIp: { flag: 'pod-ip', env: REPLICA_ENV.podIp, help: 'Own pod IP (downward API), for logs.' },
  testHooks: { flag: 'test-hooks', env: REPLICA_ENV.testHooks, help: 'TESTS ONLY: honour the x-modelmux-test-delay-ms request header.' },
  testLoadDelayMs: { flag: 'test-load-delay-ms', env: REPLICA_ENV.testLoadDelayMs, help: 'TESTS ONLY: extra milliseconds added to every model load.' },
};

const SUMMARY = 'Serve many same-shaped ONNX models from a bounded model cache fed by a model store (one process per pod).';

export function parseReplicaConfig(argv: readonly string[], env: NodeJS.ProcessEnv): ReplicaConfig {
  return parseConfig('replica', SUMMARY, replicaConfigSchema, specs, argv, env);
}
