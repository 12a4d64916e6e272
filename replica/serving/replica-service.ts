import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { ModelId } from '../../common/model-id.js';
import { splitModelId } from '../../common/model-version.js';
import type { ModelTable } from '../../common/model-table.js';
import type { CachePolicy } from '../../common/resource.js';
import type { ReplicaConfig } from '../config.js';
import { Batcher } from '../onnx/batcher.js';
import { cacheTable, failure, reasonOf, setCacheGauges, setTierGauges, tierLists } from '../cache/cache-report.js';
import { inferResponseBody, modelMetadataBody, parseInferBody } from '../../common/inference-body.js';
import type { ReplicaMetrics } from '../metrics.js';
import { ModelCache, type CacheEvent, type Loaded } from '../cache/model-cache.js';
import type { ModelStore } from '../store/model-store.js';
import { VersionLists } from '../store/version-lists.js';
import type { FileMapper } from '../onnx/file-map.js';
import { GraphSessions, type SessionOverrides } from '../onnx/graph-sessions.js';
import { modelBatching, parseModelConfig, sessionOverrides, type ModelConfig } from '../store/model-config.js';
import type { ExecutionProvider, SessionTuning } from '../onnx/onnx-runtime.js';
import type { ModelSession } from '../onnx/model-session.js';
import type { ModelSignature } from '../../common/tensor.js';
import type { InferOutcome, ServingBackend } from './serving-backend.js';
import { DeviceGate } from '../device/device-gate.js';
import { DeviceLedger, type DeviceCharge } from '../device/device-ledger.js';
import { estimateDeviceBytes, settledDeviceBytes } from '../device/device-cost.js';
import type { DeviceMeter } from '../device/nvidia-smi.js';
import { warmsBeforeListing, warmUp, type WarmupMode } from '../onnx/warm-up.js';
import { WarmTiers, type ModelSource } from './warm-tiers.js';

export interface ReplicaServiceOptions {
  store: ModelStore;
  provider: ExecutionProvider;
  session: SessionTuning;
  /** Maps the store's private files instead of reading them (absent: every load reads). */
  mapper?: FileMapper;
  maxModels: number;
  maxModelBytes?: number;
  /** Bytes of evicted models' files kept in host memory (ADR 0047); 0 keeps none. */
  hostTierBytes: number;
  /** The disk cache's revalidation window, applied to the host tier too. */
  revalidateAfterMs: number;
  /** The store's version of a model now (VersionedStore.version); without it the host tier stays off. */
  storeVersion?: (id: ModelId) => Promise<string>;
  /** The models whose files the store keeps on disk, most recently used first (S3 stores). */
  diskIds?: (limit: number) => string[];
  maxConcurrentLoads: number;
  cachePolicy: CachePolicy;
  maxBatchSize: number;
  batchWaitMs: number;
  requestTimeoutMs: number;
  /** Tests only: added to every load. */
  loadDelayMs: number;
  /** Run each model once before it enters the cache (replica/onnx/warm-up.ts). */
  warmup: WarmupMode;
  /** cuda: the device budget, resolved (replica/device/device-budget.ts); absent under cpu. */
  deviceBudget?: number;
  /** cuda: measures what each load took on the device; absent, the estimate stands. */
  deviceMeter?: DeviceMeter;
  clock: Clock;
  log: Logger;
  metrics: ReplicaMetrics;
  /** Called on every change of the loaded/loading sets. */
  onTableChange: () => void;
}

/** What a replica's configuration decides of its service: everything but its parts and wiring. */
export type ServiceTuning = Pick<
  ReplicaServiceOptions,
  | 'provider'
  | 'session'
  | 'maxModels'
  | 'maxModelBytes'
  | 'hostTierBytes'
  | 'revalidateAfterMs'
  | 'maxConcurrentLoads'
  | 'cachePolicy'
  | 'maxBatchSize'
  | 'batchWaitMs'
  | 'requestTimeoutMs'
  | 'loadDelayMs'
  | 'warmup'
>;

export function serviceTuning(config: ReplicaConfig): ServiceTuning {
  return {
    provider: config.executionProvider,
    session: { graphOptimization: config.graphOptimization, prepackWeights: config.prepackWeights, shareGraphs: config.shareGraphs, intraOpThreads: config.intraOpThreads, interOpThreads: 1 },
    maxModels: config.maxModels,
    ...(config.maxModelBytes !== undefined ? { maxModelBytes: config.maxModelBytes } : {}),
    hostTierBytes: config.hostTierBytes,
    revalidateAfterMs: config.revalidateAfterMs,
    maxConcurrentLoads: config.maxConcurrentLoads,
    cachePolicy: config.cachePolicy,
    maxBatchSize: config.maxBatchSize,
    batchWaitMs: config.batchWaitMs,
    requestTimeoutMs: config.requestTimeoutMs,
    loadDelayMs: config.testHooks ? config.testLoadDelayMs : 0,
    warmup: config.warmup,
  };
}

const ms = (n: number): string => `${n.toFixed(1)}ms`;

/** How long a listing of a model's versions in the store answers metadata requests. */
const VERSION_LIST_TTL_MS = 5_000;
/** Models whose version listings are remembered at once (each up to MAX_LISTED_VERSIONS names). */
const VERSION_LIST_MODELS = 256;

/** The replica's inference path: cache → (load from the store) → batcher → response body. */
export class ReplicaService implements ServingBackend {
  readonly cache: ModelCache<ModelSession>;
  private readonly batcher: Batcher;
  private readonly sessions: GraphSessions;
  private readonly versionLists: VersionLists | undefined;
  private readonly device: DeviceGate | undefined;
  readonly tiers: WarmTiers;

  constructor(private readonly opts: ReplicaServiceOptions) {
    this.sessions = new GraphSessions(
      opts.provider,
      opts.session,
      (kind, weights, singleRow) => {
        opts.metrics.opens.inc({ kind });
        if (weights === 'mapped') opts.metrics.mappedLoads.inc();
        if (singleRow) opts.metrics.singleRowLoads.inc();
      },
      opts.mapper,
    );
    this.tiers = new WarmTiers({
      maxBytes: opts.hostTierBytes,
      store: opts.store,
      version: opts.storeVersion,
      revalidateAfterMs: opts.revalidateAfterMs,
      clock: opts.clock,
      onChange: () => {
        setTierGauges(opts.metrics, this.tiers.tier);
        opts.onTableChange();
      },
    });
    this.cache = new ModelCache<ModelSession>({
      maxModels: opts.maxModels,
      ...(opts.maxModelBytes !== undefined ? { maxBytes: opts.maxModelBytes } : {}),
      maxConcurrentLoads: opts.maxConcurrentLoads,
      policy: opts.cachePolicy,
      clock: opts.clock,
      load: (id, fresh) => this.load(id as ModelId, fresh),
      onEvent: (e) => this.onCacheEvent(e),
    });
    if (opts.deviceBudget !== undefined) {
      const ledger = new DeviceLedger(opts.deviceBudget, (used) => opts.metrics.deviceBytesUsed.set(used));
      // A load waits for room at most as long as the request that started it.
      this.device = new DeviceGate(ledger, this.cache, opts.clock, opts.requestTimeoutMs, opts.deviceMeter);
      opts.metrics.deviceBytesBudget.set(opts.deviceBudget);
    }
    this.batcher = new Batcher(opts.clock, (n) => opts.metrics.batchSize.observe(n));
    const list = opts.store.listVersions?.bind(opts.store);
    this.versionLists = list === undefined ? undefined : new VersionLists(list, opts.clock, VERSION_LIST_TTL_MS, VERSION_LIST_MODELS);
  }

  table(): ModelTable {
    return { ...cacheTable(this.cache, this.opts.maxModels, this.opts.maxModelBytes), ...tierLists(this.tiers.tier, (id) => this.cache.has(id), this.opts.diskIds) };
  }

  /**
   * Runs one request. `holdMs` (tests only) keeps the model leased that long before running,
   * to show that an evicted model still answers the requests using it.
   */
  async infer(id: ModelId, body: unknown, binary: Uint8Array, holdMs = 0): Promise<InferOutcome> {
    return this.withDeadline(
      this.withModel(id, async (model) => {
        const req = parseInferBody(body, model.signature, binary);
        if (holdMs > 0) await sleep(holdMs);
        const outputs = await this.batcher.run(id, model, req);
        return inferResponseBody(req, id, outputs);
      }),
    );
  }

  private async signature(id: ModelId): Promise<{ signature: ModelSignature; hit: boolean }> {
    const r = await this.withDeadline(this.withModel(id, (m) => Promise.resolve(m.signature)));
    return { signature: r.body, hit: r.hit };
  }

  async metadata(id: ModelId): Promise<{ body: unknown; hit: boolean }> {
    const { signature, hit } = await this.signature(id);
    return { body: modelMetadataBody(id, signature, await this.versions(id)), hit };
  }

  /**
   * A version names itself; the default version lists the store's versions of its model, or
   * none when the store cannot be listed now: the model is loaded and its metadata still answers.
   */
  private async versions(id: ModelId): Promise<string[] | undefined> {
    const { base, version } = splitModelId(id);
    if (version !== undefined) return [version];
    try {
      return await this.versionLists?.get(base as ModelId);
    } catch (err) {
      this.opts.log.warn(`Cannot list the versions of model '${base}'.`, { model: base, event: 'list-versions-failed', ...failure(err) });
      return undefined;
    }
  }

  /** The engine is in the process: ready as long as the process is. */
  ready(): boolean {
    return true;
  }

  close(): Promise<void> {
    return this.cache.close();
  }

  private async withModel<R>(id: ModelId, use: (m: ModelSession) => Promise<R>): Promise<{ body: R; hit: boolean }> {
    const lease = await this.cache.acquire(id);
    (lease.hit ? this.opts.metrics.cacheHits : this.opts.metrics.cacheMisses).inc();
    try {
      return { body: await use(lease.value), hit: lease.hit };
    } finally {
      lease.done();
    }
  }

  /** The lease is given back when the work ends, even after the caller got its 504. */
  private withDeadline<R>(work: Promise<{ body: R; hit: boolean }>): Promise<{ body: R; hit: boolean }> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ModelmuxError('timeout', `the request did not finish within ${this.opts.requestTimeoutMs} ms`)), this.opts.requestTimeoutMs);
    });
    work.catch(() => undefined);
    return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
  }

  /**
   * Fetches, opens and warms a model; the cache lists it only once this resolves. Under CUDA
   * the load first takes its device charge, evicting for it (replica/device/device-gate.ts).
   */
  private async load(id: ModelId, fresh: boolean): Promise<Loaded<ModelSession>> {
    const started = this.opts.clock.now();
    const source = await this.tiers.source(id, fresh);
    const { metrics } = this.opts;
    metrics.loadsByTier.inc({ tier: source.tier });
    metrics.loadTierDuration.observe({ tier: source.tier }, (this.opts.clock.now() - started) / 1000);
    const file = source.tier === 'host' ? undefined : source.file;
    const modelBytes = source.tier === 'host' ? source.bytes.length : source.file.bytes;
    // Bytes onnxruntime refused are not kept in memory either: the next load asks the store.
    const failed = (): void => {
      if (source.tier === 'host') this.tiers.forget(id);
      file?.settle?.(false);
    };
    let prepared: Awaited<ReturnType<ReplicaService['prepare']>>;
    try {
      prepared = await this.prepare(id, source);
    } catch (err) {
      failed();
      throw err;
    }
    const { captured, model, config } = prepared;
    const overrides = sessionOverrides(config);
    const device = (overrides.provider ?? this.opts.provider) === 'cuda' ? this.device : undefined;
    const estimate = estimateDeviceBytes(modelBytes);
    let charge: DeviceCharge | undefined;
    try {
      // A refusal for room says nothing about the file: it stays in the disk cache.
      if (device) charge = await device.admit(id, estimate);
    } catch (err) {
      file?.settle?.(true);
      throw err;
    }
    let session: ModelSession;
    try {
      const open = (): Promise<ModelSession> => this.openWarm(id, model, file?.private === true, overrides, modelBytes, config);
      const opened = device ? await device.measure(open) : { value: await open(), measured: undefined };
      session = opened.value;
      if (charge) {
        const held = charge;
        const inner = session;
        held.settle(settledDeviceBytes(inner.kind ?? 'own_session', estimate, opened.measured));
        // Freed when the session is released, after an evicted model's last request: not at eviction.
        session = { ...inner, release: () => inner.release().finally(() => held.free()) };
      }
      // The pool's batching options are the defaults of the models that turn batching on.
      const batching = modelBatching(config, { maxBatchSize: this.opts.maxBatchSize, batchWaitMs: this.opts.batchWaitMs });
      if (batching !== undefined) session = { ...session, batching };
    } catch (err) {
      charge?.free();
      failed();
      throw err;
    }
    file?.settle?.(true);
    this.tiers.loaded(id, source, captured);
    const version = source.tier === 'host' ? { tag: source.version, checkedAt: source.checkedAt } : source.file.version;
    return { value: session, bytes: modelBytes, ...(version !== undefined ? { version: version.tag, checkedAt: version.checkedAt } : {}) };
  }

  /** What a load opens (the tier's bytes, the captured file, or its path), its config.json, and what the host tier captured. */
  private async prepare(id: ModelId, source: ModelSource): Promise<{ captured: Uint8Array | undefined; model: string | Uint8Array; config: ModelConfig }> {
    if (this.opts.loadDelayMs > 0) await sleep(this.opts.loadDelayMs);
    if (source.tier === 'host') return { captured: undefined, model: source.bytes, config: source.config !== undefined ? parseModelConfig(id, source.config) : {} };
    const file = source.file;
    const captured = await this.tiers.capture(file);
    // A mappable file is still opened by its path: its weights stay views of the page cache.
    const mapped = file.private === true && this.opts.mapper !== undefined;
    const model = captured !== undefined && !mapped ? captured : file.path;
    return { captured, model, config: file.config !== undefined ? parseModelConfig(id, file.config) : {} };
  }

  /** Opens the model and runs its warm-up, timing both phases; a model whose warm-up fails is released. */
  private async openWarm(id: ModelId, model: string | Uint8Array, mappable: boolean, overrides: SessionOverrides, bytes: number, config: ModelConfig): Promise<ModelSession> {
    const { clock, metrics } = this.opts;
    const started = clock.now();
    const session = await this.sessions.open(model, mappable, overrides, bytes);
    const opened = clock.now();
    metrics.loadPhase.observe({ phase: 'load' }, (opened - started) / 1000);
    if (!warmsBeforeListing(this.opts.warmup, overrides.provider ?? this.opts.provider, config.warmup, session.graph?.warm === true)) return session;
    try {
      await warmUp(session, config.warmup);
      if (session.graph) session.graph.warm = true;
    } catch (err) {
      await session.release().catch(() => undefined);
      this.opts.log.warn(`Model '${id}' failed its warm-up run.`, { model: id, event: 'warmup-failed', ...failure(err) });
      throw err;
    }
    metrics.loadPhase.observe({ phase: 'warm' }, (clock.now() - opened) / 1000);
    return session;
  }

  private onCacheEvent(e: CacheEvent): void {
    const { log, metrics } = this.opts;
    switch (e.type) {
      case 'load-start':
        log.info(`Loading model '${e.id}'.`, { model: e.id, event: 'load-start' });
        break;
      case 'load-end':
        metrics.loads.inc({ result: e.ok ? 'success' : 'failure' });
        metrics.loadDuration.observe(e.durationMs / 1000);
        if (e.ok) log.info(`Successfully loaded model '${e.id}' in ${ms(e.durationMs)}.`, { model: e.id, event: 'load-end', durationMs: e.durationMs, bytes: e.bytes });
        else log.warn(`Failed to load model '${e.id}' after ${ms(e.durationMs)}.`, { model: e.id, event: 'load-failed', durationMs: e.durationMs, ...failure(e.error) });
        break;
      case 'evict':
        metrics.evictions.inc({ reason: e.reason });
        this.tiers.evicted(e.id, e.reason);
        log.info(e.reason === 'capacity' ? `Unloading model '${e.id}'.` : `Not keeping model '${e.id}': asked for less often than the model it would evict.`, {
          model: e.id,
          event: 'evict',
          reason: e.reason,
          inUse: e.inUse,
        });
        break;
      case 'swap':
        metrics.swaps.inc({ result: e.ok ? 'success' : 'failure' });
        if (e.ok) log.info(`Swapped in the new version of model '${e.id}' in ${ms(e.durationMs)}.`, { model: e.id, event: 'swap', durationMs: e.durationMs, bytes: e.bytes, inUse: e.inUse });
        else
          log.warn(`Failed to load the new version of model '${e.id}' after ${ms(e.durationMs)}; the loaded version serves on.`, {
            model: e.id,
            event: 'swap-failed',
            durationMs: e.durationMs,
            ...failure(e.error),
          });
        break;
      case 'release':
        metrics.releases.inc();
        metrics.sharedGraphs.set(this.sessions.sharedCount);
        if (e.error === undefined) log.info(`Successfully unloaded model '${e.id}' in ${ms(e.durationMs)}.`, { model: e.id, event: 'release', durationMs: e.durationMs });
        else log.error(`Failed to release model '${e.id}'.`, { model: e.id, event: 'release-failed', reason: reasonOf(e.error) });
        break;
      case 'change':
        setCacheGauges(metrics, this.cache);
        metrics.sharedGraphs.set(this.sessions.sharedCount);
        this.opts.onTableChange();
        break;
    }
  }
}
