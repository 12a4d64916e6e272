import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock, type Clock } from '../common/clock.js';
import { ConfigError } from '../common/config.js';
import { ByteBudget } from '../common/byte-budget.js';
import { grpcStatusName } from '../common/grpc/status.js';
import { UnaryServer, type UnaryServerEvents } from '../common/grpc/unary-server.js';
import { createLogger, stdoutSink, type Logger } from '../common/log.js';
import { REPLICA_ENV } from '../common/replica-env.js';
import { CUDA_LIBS_ENV } from '../common/cuda/cuda-libraries.js';
import { parseReplicaConfig, type ReplicaConfig } from './config.js';
import { alignFileWeights, loadFileMapper } from './onnx/file-map.js';
import { IdleMappings } from './onnx/idle-mappings.js';
import { FileModelStore } from './store/file-model-store.js';
import { grpcServerLimits } from './grpc/grpc-options.js';
import { grpcMethods } from './grpc/grpc-server.js';
import { GrpcHttp1Server } from './grpc/grpc-http1-server.js';
import { isGrpcHttp1Request } from '../common/grpc/grpc-http1-form.js';
import type { ServedHandler } from '../common/grpc/unary-call.js';
import { HotnessMeter } from './publication/hotness.js';
import { createReplicaMetrics, type ReplicaMetrics } from './metrics.js';
import { LoadedRevalidator } from './cache/loaded-revalidation.js';
import type { VersionedStore } from './store/model-store.js';
import { checkExecutionProvider } from './onnx/onnx-runtime.js';
import { resolveDeviceBudget } from './device/device-budget.js';
import { nvidiaSmiMeter, type DeviceMeter } from './device/nvidia-smi.js';
import { PeerFiles } from './store/peer-files.js';
import { PublishCoalescer } from './publication/publish-coalescer.js';
import { ReplicaService, serviceTuning } from './serving/replica-service.js';
import { S3ModelStore } from './store/s3-model-store.js';
import { createReplicaApp } from './http/server.js';
import type { ServingBackend } from './serving/serving-backend.js';
import { startSidecarService } from './sidecar/sidecar-main.js';
import { kubePodPatcher, tablePatch } from './publication/table-publisher.js';

/** How often the deletion cost is re-checked when the model set does not change. */
const COST_REFRESH_MS = 10_000;

/** An error of a flag's value, as the replica's config errors are worded. */
function flagError(flag: string, envName: string, err: unknown): ConfigError {
  return new ConfigError('replica', [`${flag}/${envName}: ${err instanceof Error ? err.message : String(err)}`]);
}

async function checkProvider(config: ReplicaConfig, env: NodeJS.ProcessEnv): Promise<void> {
  try {
    await checkExecutionProvider(config.executionProvider, env[CUDA_LIBS_ENV]);
  } catch (err) {
    throw flagError('--execution-provider', REPLICA_ENV.executionProvider, err);
  }
}

/** cuda: the device budget and its meter (NVML through nvidia-smi); nothing under cpu. */
async function deviceBudget(config: ReplicaConfig, env: NodeJS.ProcessEnv): Promise<{ deviceBudget?: number; deviceMeter?: DeviceMeter }> {
  if (config.executionProvider !== 'cuda') return {};
  const meter = nvidiaSmiMeter(env, process.pid);
  let budget: number | undefined;
  try {
    budget = await resolveDeviceBudget(config.executionProvider, config.deviceMemoryBytes, () => meter.total());
  } catch (err) {
    throw flagError(
      '--device-memory-bytes',
      REPLICA_ENV.deviceMemoryBytes,
      new Error(`no value, and the GPU's memory cannot be read to default it: ${err instanceof Error ? err.message : String(err)}`),
    );
  }
  return { ...(budget !== undefined ? { deviceBudget: budget } : {}), deviceMeter: meter };
}

/**
 * Only the S3 store's downloads are mapped: the replica wrote them and never rewrites them,
 * where a file:// folder is the user's, and a file truncated while mapped would crash us.
 */
function weightMapper(config: ReplicaConfig, log: Logger, metrics: ReplicaMetrics): IdleMappings | undefined {
  if (!config.modelSource.startsWith('s3://') || !config.shareGraphs || !config.mapWeights || config.runtimeUrl !== undefined) return undefined;
  const loaded = loadFileMapper();
  if ('unavailable' in loaded) {
    log.warn('model weights are read into memory at each load, not mapped', { event: 'no-mapping', reason: loaded.unavailable });
    return undefined;
  }
  // Parked mappings are of files in the disk cache, which deletes through forget(): its bound is theirs.
  return new IdleMappings(loaded, config.diskCacheBytes, () => metrics.mappingReuses.inc());
}

interface StoreParts {
  config: ReplicaConfig;
  clock: Clock;
  log: Logger;
  metrics: ReplicaMetrics;
  mapper: IdleMappings | undefined;
  /** Whether a model is loaded: the disk cache keeps its files. */
  keep: (id: string) => boolean;
}

function peerFiles(shared: string, crossDevice: () => void): PeerFiles {
  try {
    return new PeerFiles(shared, crossDevice);
  } catch (err) {
    throw flagError('--shared-cache-dir', REPLICA_ENV.sharedCacheDir, err);
  }
}

/** The model store; an S3 store's downloads go to `ownCacheDir` when no cache folder is configured (removed at exit). */
async function openStore(parts: StoreParts): Promise<{ store: VersionedStore; s3?: S3ModelStore; ownCacheDir?: string }> {
  const { config, clock, log, metrics, mapper } = parts;
  // A file:// store is read in place; only S3 downloads need the cache dir.
  if (!config.modelSource.startsWith('s3://')) return { store: new FileModelStore(config.modelSource, config.maxModelBytes, clock) };
  const shared = config.sharedCacheDir;
  const peers =
    shared === undefined
      ? undefined
      : peerFiles(shared, () => log.warn('the shared cache folder is on another filesystem than the cache folder: every model is downloaded again', { sharedCacheDir: shared, cacheDir }));
  let ownCacheDir: string | undefined;
  const cacheDir = config.cacheDir ?? (ownCacheDir = await mkdtemp(join(tmpdir(), 'modelmux-cache-')));
  const s3 = new S3ModelStore({
    uri: config.modelSource,
    region: config.s3Region,
    cacheDir,
    diskCacheBytes: config.diskCacheBytes,
    revalidateAfterMs: config.revalidateAfterMs,
    socketTimeoutMs: config.storeTimeoutMs,
    ...(peers !== undefined ? { peers } : {}),
    clock,
    onFetch: (source) => metrics.fetches.inc({ source }),
    keep: parts.keep,
    ...(mapper !== undefined ? { prepare: (path: string) => alignFileWeights(path, config.maxModelBytes), onRemove: (path: string) => mapper.forget(path) } : {}),
    ...(config.s3Endpoint !== undefined ? { endpoint: config.s3Endpoint } : {}),
    ...(config.s3ForcePathStyle !== undefined ? { forcePathStyle: config.s3ForcePathStyle } : {}),
    ...(config.maxModelBytes !== undefined ? { maxFileBytes: config.maxModelBytes } : {}),
  });
  return { store: s3, s3, ...(ownCacheDir !== undefined ? { ownCacheDir } : {}) };
}
/**
 * Publishes the model table and the deletion cost on the replica's pod, when it runs in one:
 * on each change of the table, and when the cost moves while the model set does not.
 */
function publishOnPod(
  config: ReplicaConfig,
  parts: { service: ServingBackend; hotness: HotnessMeter; clock: Clock; log: Logger; metrics: ReplicaMetrics },
): { coalescer: PublishCoalescer; costTimer: NodeJS.Timeout } | undefined {
  if (config.podName === undefined || config.podNamespace === undefined) return undefined;
  const { service, hotness, log, metrics } = parts;
  const patch = kubePodPatcher(config.podName, config.podNamespace);
  let publishedCost = -1;
  const coalescer = new PublishCoalescer({
    minIntervalMs: config.publishIntervalMs,
    maxBackoffMs: 30_000,
    clock: parts.clock,
    schedule: (fn, ms) => {
      const t = setTimeout(fn, ms);
      return () => clearTimeout(t);
    },
    publish: async () => {
      const cost = hotness.cost();
      try {
        await patch(tablePatch(service.table(), cost));
        publishedCost = cost;
        metrics.tablePublishes.inc({ result: 'success' });
      } catch (err) {
        metrics.tablePublishes.inc({ result: 'failure' });
        log.warn('cannot publish the model table on the pod', { reason: err instanceof Error ? err.message : String(err) });
        throw err;
      }
    },
  });
  coalescer.notify();
  const costTimer = setInterval(() => {
    if (hotness.cost() !== publishedCost) coalescer.notify();
  }, COST_REFRESH_MS);
  costTimer.unref();
  return { coalescer, costTimer };
}

/** The Open Inference Protocol's gRPC form (docs/grpc.md): same service, admission and codes; none with --grpc-port -1. */
function grpcServer(config: ReplicaConfig, methods: ReadonlyMap<string, ServedHandler>, events: UnaryServerEvents): UnaryServer | undefined {
  if (config.grpcPort === -1) return undefined;
  return new UnaryServer({
    methods,
    limits: grpcServerLimits(config),
    budget: new ByteBudget(config.grpcMaxBufferedBytes, 'replica'),
    events,
    portFlag: '--grpc-port',
  });
}

/** What the gRPC port and the HTTP port's gRPC form count of their connections and calls. */
function grpcServerEvents(metrics: ReplicaMetrics): UnaryServerEvents {
  return {
    refused: (reason) => metrics.grpcBounds.inc({ reason }),
    timedOut: (phase) => metrics.grpcBounds.inc({ reason: phase }),
    callRefused: (method, code, err) => {
      metrics.grpcRequests.inc({ method, code: grpcStatusName(code) });
      if (err?.code === 'buffer_full') metrics.grpcBounds.inc({ reason: 'buffer_full' });
    },
  };
}

/** `modelmux replica`: wiring only. Resolves once listening; SIGTERM/SIGINT drain and exit. */
export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const config = parseReplicaConfig(argv, env);
  const clock = systemClock;
  const baseLog = createLogger({ component: 'replica', ...(config.podName ? { pod: config.podName } : {}) }, stdoutSink, config.logLevel);
  await checkProvider(config, env);
  const device = await deviceBudget(config, env);

  const metrics = createReplicaMetrics();
  const mapper = weightMapper(config, baseLog, metrics);
  // `keep` is called only by loads, which come after the service exists.
  const { store, s3, ownCacheDir } = await openStore({ config, clock, log: baseLog, metrics, mapper, keep: (id) => service.cache.has(id) });

  const hotness = new HotnessMeter(clock);
  let coalescer: PublishCoalescer | undefined;
  const { runtimeUrl } = config;
  const engine =
    runtimeUrl === undefined
      ? new ReplicaService({
          ...serviceTuning(config),
          ...device,
          store,
          storeVersion: (id) => store.version(id),
          ...(s3 !== undefined ? { diskIds: (limit: number) => s3.diskIds(limit) } : {}),
          ...(mapper !== undefined ? { mapper } : {}),
          clock,
          log: baseLog,
          metrics,
          onTableChange: () => coalescer?.notify(),
        })
      : undefined;
  // Sidecar mode (docs/sidecar.md): a serving runtime beside the replica loads and runs the models.
  const service: ServingBackend = engine ?? (await startSidecarService({ ...config, runtimeUrl: runtimeUrl as string }, clock, baseLog, metrics, () => coalescer?.notify()));

  const revalidator =
    engine !== undefined && config.revalidateLoadedMs > 0
      ? new LoadedRevalidator({
          cache: engine.cache,
          version: (id) => store.version(id),
          pace: { intervalMs: config.revalidateLoadedMs, perSecond: config.revalidateLoadedPerSecond },
          clock,
          log: baseLog,
          onResult: (result) => metrics.revalidations.inc({ result }),
        })
      : undefined;
  revalidator?.start();

  const publication = publishOnPod(config, { service, hotness, clock, log: baseLog, metrics });
  // Table changes before now (a sidecar's first loads) go unpublished: the first publication carries them.
  if (publication) coalescer = publication.coalescer;

  let replicaName = config.replicaName ?? config.podName ?? 'replica';
  const { app, state } = createReplicaApp({
    service,
    metrics,
    log: baseLog,
    replicaName: () => replicaName,
    maxOngoingRequests: config.maxOngoingRequests,
    maxBodyBytes: config.maxBodyBytes,
    testHooks: config.testHooks,
    onServed: () => hotness.hit(),
  });

  const methods = grpcMethods({
    service,
    metrics,
    log: baseLog,
    state,
    replicaName: () => replicaName,
    maxOngoingRequests: config.maxOngoingRequests,
    testHooks: config.testHooks,
    onServed: () => hotness.hit(),
    binaryInputs: engine !== undefined,
  });
  // The router's gRPC calls over this port (ADR 0054) reach the gRPC port's handlers, under its
  // bounds; the rest is the HTTP API. Without a gRPC port (--grpc-port -1) the form is not served
  // either: the HTTP API answers it 404, as an older replica does.
  const grpcEvents = grpcServerEvents(metrics);
  const grpcOverHttp1 = config.grpcPort === -1 ? undefined : new GrpcHttp1Server({ methods, limits: grpcServerLimits(config), events: grpcEvents });
  const server = createServer((req, res) => {
    if (grpcOverHttp1 !== undefined && isGrpcHttp1Request(req.method, req.url, req.headers['content-type'])) grpcOverHttp1.serve(req, res);
    else app(req, res);
  }).listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  server.keepAliveTimeout = 65_000;
  const addr = server.address() as AddressInfo;
  if (config.replicaName === undefined && config.podName === undefined) replicaName = `${addr.address}:${addr.port}`;
  if (config.maxConnections > 0) server.maxConnections = config.maxConnections;
  const grpc = grpcServer(config, methods, grpcEvents);
  const grpcPort = grpc === undefined ? undefined : await grpc.listen(config.grpcPort, config.host);
  baseLog.info('replica listening', {
    event: 'listening',
    host: addr.address,
    port: addr.port,
    ...(grpcPort !== undefined ? { grpcPort } : {}),
    store: store.uri,
    maxModels: config.maxModels,
    maxOngoingRequests: config.maxOngoingRequests,
    maxBatchSize: config.maxBatchSize,
    executionProvider: config.executionProvider,
    ...(device.deviceBudget !== undefined ? { deviceBudget: device.deviceBudget } : {}),
    weights: mapper !== undefined ? 'mapped' : 'read',
    ...(config.runtimeUrl !== undefined ? { runtime: config.runtimeUrl } : {}),
  });

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    state.shuttingDown = true;
    baseLog.info('draining', { event: 'draining', signal, ongoing: state.ongoing });
    if (publication) clearInterval(publication.costTimer);
    revalidator?.stop();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    const idle = setInterval(() => server.closeIdleConnections(), 100);
    server.closeIdleConnections();
    await Promise.all([closed, grpc?.drain(config.requestTimeoutMs)]);
    grpcOverHttp1?.close();
    clearInterval(idle);
    await service.close();
    await coalescer?.flush();
    coalescer?.stop();
    s3?.destroy();
    if (ownCacheDir !== undefined) await rm(ownCacheDir, { recursive: true, force: true });
    baseLog.info('stopped', { event: 'stopped' });
    process.exit(0);
  };
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => void shutdown(sig));
  // Last line of defence of "no request can crash the process": every known path catches its
  // errors; anything that slips through is logged loudly instead of killing every other request.
  process.on('unhandledRejection', (reason) => {
    baseLog.error('unhandled rejection', { reason: reason instanceof Error ? (reason.stack ?? reason.message) : String(reason) });
  });
}
