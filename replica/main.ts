import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../common/clock.js';
import { ConfigError } from '../common/config.js';
import { ByteBudget } from '../common/byte-budget.js';
import { grpcStatusName } from '../common/grpc/status.js';
import { UnaryServer } from '../common/grpc/unary-server.js';
import { createLogger, stdoutSink } from '../common/log.js';
import { REPLICA_ENV } from '../common/replica-env.js';
import { parseReplicaConfig } from './config.js';
import { alignFileWeights, loadFileMapper } from './onnx/file-map.js';
import { IdleMappings } from './onnx/idle-mappings.js';
import { FileModelStore } from './store/file-model-store.js';
import { grpcServerLimits } from './grpc/grpc-options.js';
import { grpcMethods } from './grpc/grpc-server.js';
import { HotnessMeter } from './publication/hotness.js';
import { createReplicaMetrics } from './metrics.js';
import { LoadedRevalidator } from './cache/loaded-revalidation.js';
import type { VersionedStore } from './store/model-store.js';
import { checkExecutionProvider } from './onnx/onnx-runtime.js';
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

/** `modelmux replica`: wiring only. Resolves once listening; SIGTERM/SIGINT drain and exit. */
export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const config = parseReplicaConfig(argv, env);
  const clock = systemClock;
  const baseLog = createLogger({ component: 'replica', ...(config.podName ? { pod: config.podName } : {}) }, stdoutSink, config.logLevel);
  try {
    await checkExecutionProvider(config.executionProvider);
  } catch (err) {
    throw new ConfigError('replica', [`--execution-provider/${REPLICA_ENV.executionProvider}: ${err instanceof Error ? err.message : String(err)}`]);
  }

  const metrics = createReplicaMetrics();
  // A file:// store is read in place; only S3 downloads need the cache dir.
  let ownCacheDir: string | undefined;
  let s3: S3ModelStore | undefined;
  let store: VersionedStore;
  // Only the S3 store's downloads are mapped: the replica wrote them and never rewrites them,
  // where a file:// folder is the user's, and a file truncated while mapped would crash us.
  let mapper: IdleMappings | undefined;
  if (config.modelSource.startsWith('s3://') && config.shareGraphs && config.mapWeights && config.runtimeUrl === undefined) {
    const loaded = loadFileMapper();
    if ('unavailable' in loaded) baseLog.warn('model weights are read into memory at each load, not mapped', { event: 'no-mapping', reason: loaded.unavailable });
    // Parked mappings are of files in the disk cache, which deletes through forget(): its bound is theirs.
    else mapper = new IdleMappings(loaded, config.diskCacheBytes, () => metrics.mappingReuses.inc());
  }
  if (config.modelSource.startsWith('s3://')) {
    let peers: PeerFiles | undefined;
    if (config.sharedCacheDir !== undefined) {
      const shared = config.sharedCacheDir;
      const crossDevice = (): void => baseLog.warn('the shared cache folder is on another filesystem than the cache folder: every model is downloaded again', { sharedCacheDir: shared, cacheDir });
      try {
        peers = new PeerFiles(shared, crossDevice);
      } catch (err) {
        throw new ConfigError('replica', [`--shared-cache-dir/${REPLICA_ENV.sharedCacheDir}: ${err instanceof Error ? err.message : String(err)}`]);
      }
    }
    const cacheDir = config.cacheDir ?? (ownCacheDir = await mkdtemp(join(tmpdir(), 'modelmux-cache-')));
    s3 = new S3ModelStore({
      uri: config.modelSource,
      region: config.s3Region,
      cacheDir,
      diskCacheBytes: config.diskCacheBytes,
      revalidateAfterMs: config.revalidateAfterMs,
      socketTimeoutMs: config.storeTimeoutMs,
      ...(peers !== undefined ? { peers } : {}),
      clock,
      onFetch: (source) => metrics.fetches.inc({ source }),
      // Called only by loads, which come after the service exists.
      keep: (id) => service.cache.has(id),
      ...(mapper !== undefined ? { prepare: (path: string) => alignFileWeights(path, config.maxModelBytes), onRemove: (path: string) => mapper?.forget(path) } : {}),
      ...(config.s3Endpoint !== undefined ? { endpoint: config.s3Endpoint } : {}),
      ...(config.s3ForcePathStyle !== undefined ? { forcePathStyle: config.s3ForcePathStyle } : {}),
      ...(config.maxModelBytes !== undefined ? { maxFileBytes: config.maxModelBytes } : {}),
    });
    store = s3;
  } else {
    store = new FileModelStore(config.modelSource, config.maxModelBytes, clock);
  }

  const hotness = new HotnessMeter(clock);
  let coalescer: PublishCoalescer | undefined;
  const { runtimeUrl } = config;
  const engine =
    runtimeUrl === undefined
      ? new ReplicaService({
          ...serviceTuning(config),
          store,
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

  let costTimer: NodeJS.Timeout | undefined;
  if (config.podName !== undefined && config.podNamespace !== undefined) {
    const patch = kubePodPatcher(config.podName, config.podNamespace);
    let publishedCost = -1;
    const c = new PublishCoalescer({
      minIntervalMs: config.publishIntervalMs,
      maxBackoffMs: 30_000,
      clock,
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
          baseLog.warn('cannot publish the model table on the pod', { reason: err instanceof Error ? err.message : String(err) });
          throw err;
        }
      },
    });
    coalescer = c;
    c.notify();
    costTimer = setInterval(() => {
      if (hotness.cost() !== publishedCost) c.notify();
    }, COST_REFRESH_MS);
    costTimer.unref();
  }

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

  const server = app.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  server.keepAliveTimeout = 65_000;
  const addr = server.address() as AddressInfo;
  if (config.replicaName === undefined && config.podName === undefined) replicaName = `${addr.address}:${addr.port}`;
  if (config.maxConnections > 0) server.maxConnections = config.maxConnections;
  // The Open Inference Protocol's gRPC form (docs/grpc.md): same service, admission and codes.
  const grpc =
    config.grpcPort === -1
      ? undefined
      : new UnaryServer({
          methods: grpcMethods({
            service,
            metrics,
            log: baseLog,
            state,
            replicaName: () => replicaName,
            maxOngoingRequests: config.maxOngoingRequests,
            testHooks: config.testHooks,
            onServed: () => hotness.hit(),
            binaryInputs: engine !== undefined,
          }),
          limits: grpcServerLimits(config),
          budget: new ByteBudget(config.grpcMaxBufferedBytes, 'replica'),
          events: {
            refused: (reason) => metrics.grpcBounds.inc({ reason }),
            timedOut: (phase) => metrics.grpcBounds.inc({ reason: phase }),
            callRefused: (method, code, err) => {
              metrics.grpcRequests.inc({ method, code: grpcStatusName(code) });
              if (err?.code === 'buffer_full') metrics.grpcBounds.inc({ reason: 'buffer_full' });
            },
          },
          portFlag: '--grpc-port',
        });
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
    weights: mapper !== undefined ? 'mapped' : 'read',
    ...(config.runtimeUrl !== undefined ? { runtime: config.runtimeUrl } : {}),
  });

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    state.shuttingDown = true;
    baseLog.info('draining', { event: 'draining', signal, ongoing: state.ongoing });
    if (costTimer) clearInterval(costTimer);
    revalidator?.stop();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    const idle = setInterval(() => server.closeIdleConnections(), 100);
    server.closeIdleConnections();
    await Promise.all([closed, grpc?.drain(config.requestTimeoutMs)]);
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
