import type { Clock } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { idSegment, type ModelId } from '../../common/model-id.js';
import type { ModelTable } from '../../common/model-table.js';
import type { CachePolicy } from '../../common/resource.js';
import { cacheTable, failure, reasonOf, setCacheGauges } from '../cache/cache-report.js';
import type { ReplicaMetrics } from '../metrics.js';
import { ModelCache, type CacheEvent, type Lease, type Loaded, type Releasable } from '../cache/model-cache.js';
import type { ModelFolders } from '../store/model-folders.js';
import type { InferOutcome, ServingBackend } from '../serving/serving-backend.js';
import { RuntimeTimeout, type RuntimeAnswer, type V2RuntimeClient } from './v2-runtime-client.js';

export interface SidecarServiceOptions {
  folders: ModelFolders;
  runtime: V2RuntimeClient;
  maxModels: number;
  maxModelBytes?: number;
  maxConcurrentLoads: number;
  cachePolicy: CachePolicy;
  requestTimeoutMs: number;
  /** How often the runtime's readiness and repository index are read. */
  pollMs: number;
  clock: Clock;
  log: Logger;
  metrics: ReplicaMetrics;
  onTableChange: () => void;
}

/** Maps a runtime's refusal of an inference request to the catalogue. */
export function inferenceError(id: string, answer: Pick<RuntimeAnswer, 'status' | 'body'>): ModelmuxError {
  const text = answer.body.toString('utf8').slice(0, 500);
  if (answer.status === 400 || answer.status === 422) return new ModelmuxError('invalid_request', `the runtime refused the request for model "${id}": ${text}`);
  if (answer.status === 404 || answer.status >= 502) return new ModelmuxError('runtime_unavailable', `the runtime answered ${answer.status} for model "${id}": ${text}`);
  return new ModelmuxError('inference_failed', `the runtime failed to run model "${id}" (${answer.status}): ${text}`);
}

/** Probes in a row a runtime may leave unanswered in time before it counts as down. */
const SLOW_PROBES_TO_DOWN = 3;

/**
 * The streak of slow probes after one more probe, and whether this probe's verdict counts:
 * a probe that was answered always does; a slow one only once SLOW_PROBES_TO_DOWN are in a row.
 */
export function slowProbeStreak(streak: number, slow: boolean): { streak: number; counts: boolean } {
  const next = slow ? streak + 1 : 0;
  return { streak: next, counts: next === 0 || next >= SLOW_PROBES_TO_DOWN };
}

/**
 * Which loaded models the runtime no longer holds: those loaded before the index was asked for
 * (a load that ended after it is not in it yet) and missing from it. `undefined` index: the
 * runtime is not ready, so it holds none. The runtime names a model by its folder: idSegment(id).
 */
export function lostModels(loadedAt: ReadonlyMap<string, number>, askedAt: number, index: ReadonlySet<string> | undefined): string[] {
  const lost: string[] = [];
  for (const [id, at] of loadedAt) if (at <= askedAt && index?.has(idSegment(id)) !== true) lost.push(id);
  return lost;
}

/**
 * Sidecar mode: the replica's cache over a serving runtime beside it (MLServer, Triton). A load
 * copies the model's folder into the folder both containers share and asks the runtime to load
 * it (V2 repository extension); an eviction unloads it and deletes the folder; inference is
 * forwarded. The same LRU as the built-in engine: count and bytes, single flight, refcounted
 * release, frequency admission. The table never names a model the runtime does not hold: a
 * runtime that stops answering empties it, and one that restarted loses the models it forgot.
 */
export class SidecarService implements ServingBackend {
  readonly cache: ModelCache<Releasable>;
  private runtimeReady = false;
  /** Probes in a row the runtime did not answer in time. */
  private slowProbes = 0;
  /** When each loaded model's load ended, by the clock: what the index check compares with. */
  private readonly loadedAt = new Map<string, number>();
  /** Unloads under way per id: a new load of the same id waits, so the unload cannot undo it. */
  private readonly unloading = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;

  constructor(private readonly opts: SidecarServiceOptions) {
    this.cache = new ModelCache<Releasable>({
      maxModels: opts.maxModels,
      ...(opts.maxModelBytes !== undefined ? { maxBytes: opts.maxModelBytes } : {}),
      maxConcurrentLoads: opts.maxConcurrentLoads,
      policy: opts.cachePolicy,
      clock: opts.clock,
      load: (id) => this.load(id as ModelId),
      onEvent: (e) => this.onCacheEvent(e),
    });
  }

  /** Starts watching the runtime; resolves after the first look. */
  async start(): Promise<void> {
    await this.poll();
    this.timer = setInterval(() => {
      this.polling ??= this.poll().finally(() => (this.polling = undefined));
    }, this.opts.pollMs);
  }

  ready(): boolean {
    return this.runtimeReady;
  }

  table(): ModelTable {
    return cacheTable(this.cache, this.opts.maxModels, this.opts.maxModelBytes);
  }

  async infer(id: ModelId, body: unknown, binary: Uint8Array): Promise<InferOutcome> {
    return this.withModel(id, async () => {
      const head = Buffer.from(JSON.stringify(body));
      const answer = await this.opts.runtime.forward(
        `/v2/models/${encodeURIComponent(idSegment(id))}/infer`,
        binary.length > 0 ? Buffer.concat([head, binary]) : head,
        binary.length > 0 ? String(head.length) : undefined,
        this.opts.requestTimeoutMs,
      );
      if (answer.status !== 200) throw this.refused(id, answer);
      const jsonLength = answer.headerLength !== undefined ? Number(answer.headerLength) : answer.body.length;
      const json: unknown = JSON.parse(answer.body.subarray(0, jsonLength).toString('utf8'));
      return jsonLength < answer.body.length ? { json, binary: [answer.body.subarray(jsonLength)] } : { json };
    });
  }

  async metadata(id: ModelId): Promise<{ body: unknown; hit: boolean }> {
    const r = await this.withModel(id, async () => {
      const answer = await this.opts.runtime.forward(`/v2/models/${encodeURIComponent(idSegment(id))}`, undefined, undefined, this.opts.requestTimeoutMs);
      if (answer.status !== 200) throw this.refused(id, answer);
      return JSON.parse(answer.body.toString('utf8')) as unknown;
    });
    return { body: r.body, hit: r.hit };
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.polling;
    await this.cache.close();
    await Promise.allSettled([...this.unloading.values()]);
    await this.opts.runtime.close();
  }

  private async withModel<R>(id: ModelId, use: () => Promise<R>): Promise<{ body: R; hit: boolean }> {
    if (!this.runtimeReady) throw new ModelmuxError('runtime_unavailable', 'the serving runtime beside the replica is not ready');
    const lease: Lease<Releasable> = await this.cache.acquire(id);
    (lease.hit ? this.opts.metrics.cacheHits : this.opts.metrics.cacheMisses).inc();
    try {
      return { body: await use(), hit: lease.hit };
    } finally {
      lease.done();
    }
  }

  /** A runtime that answers 404 for a model we hold lost it (restarted): it is loaded again next time. */
  private refused(id: ModelId, answer: RuntimeAnswer): ModelmuxError {
    if (answer.status === 404) this.forget([id], 'the runtime no longer holds it');
    return inferenceError(id, answer);
  }

  private async load(id: ModelId): Promise<Loaded<Releasable>> {
    await this.unloading.get(id);
    if (!this.runtimeReady) throw new ModelmuxError('runtime_unavailable', 'the serving runtime beside the replica is not ready');
    const { folders, runtime, clock } = this.opts;
    const started = clock.now();
    const bytes = await folders.fetch(id);
    const downloaded = clock.now();
    try {
      await runtime.load(idSegment(id));
    } catch (err) {
      await folders.remove(id);
      throw err;
    }
    this.loadedAt.set(id, clock.now());
    this.opts.log.info(`The runtime loaded model '${id}'.`, { model: id, event: 'runtime-load', downloadMs: downloaded - started, runtimeLoadMs: clock.now() - downloaded, bytes });
    return {
      bytes,
      value: {
        release: () => {
          this.loadedAt.delete(id);
          const unload = runtime
            .unload(idSegment(id))
            .finally(() => folders.remove(id))
            .finally(() => this.unloading.delete(id));
          this.unloading.set(
            id,
            unload.catch(() => undefined),
          );
          return unload;
        },
      },
    };
  }

  /**
   * Reads the runtime's readiness and index; evicts what it does not hold. A runtime that is
   * down (refuses connections) counts at once; one that is slow to answer, or answers not ready,
   * only after a few probes in a row (slowProbeStreak), as a kubelet's failureThreshold: MLServer
   * answers not ready while any model loads or unloads, and one such answer must not empty the table.
   */
  private async poll(): Promise<void> {
    const askedAt = this.opts.clock.now();
    let index: Set<string> | undefined;
    let slow = false;
    const probe = await this.opts.runtime.ready();
    if (probe === 'ready') {
      try {
        index = await this.opts.runtime.readyModels();
      } catch (err) {
        slow = err instanceof RuntimeTimeout;
        this.opts.log.warn("cannot read the runtime's repository index", { reason: err instanceof Error ? err.message : String(err) });
      }
    } else slow = probe === 'slow' || probe === 'unready';
    const streak = slowProbeStreak(this.slowProbes, slow);
    this.slowProbes = streak.streak;
    if (!streak.counts) return;
    const ready = index !== undefined;
    if (ready !== this.runtimeReady) {
      this.runtimeReady = ready;
      if (ready) this.opts.log.info('the serving runtime is ready', { event: 'runtime-ready', runtime: this.opts.runtime.url });
      else this.opts.log.warn('the serving runtime is not ready: the replica is not ready and holds no model', { event: 'runtime-not-ready', runtime: this.opts.runtime.url });
    }
    this.forget(lostModels(this.loadedAt, askedAt, index), ready ? 'the runtime no longer holds it' : 'the runtime is not ready');
  }

  private forget(ids: readonly string[], reason: string): void {
    for (const id of ids) {
      if (!this.cache.has(id)) continue;
      this.opts.log.warn(`Forgetting model '${id}': ${reason}.`, { model: id, event: 'runtime-lost', reason });
      this.loadedAt.delete(id);
      this.cache.evict(id);
    }
  }

  private onCacheEvent(e: CacheEvent): void {
    const { log, metrics } = this.opts;
    switch (e.type) {
      case 'load-end':
        metrics.loads.inc({ result: e.ok ? 'success' : 'failure' });
        metrics.loadDuration.observe(e.durationMs / 1000);
        if (!e.ok) {
          log.warn(`Failed to load model '${e.id}'.`, { model: e.id, event: 'load-failed', ...failure(e.error) });
        }
        break;
      case 'evict':
        metrics.evictions.inc({ reason: e.reason });
        log.info(`Unloading model '${e.id}' from the runtime.`, { model: e.id, event: 'evict', reason: e.reason, inUse: e.inUse });
        break;
      case 'release':
        metrics.releases.inc();
        if (e.error !== undefined) log.error(`Failed to unload model '${e.id}' from the runtime.`, { model: e.id, event: 'release-failed', reason: reasonOf(e.error) });
        break;
      case 'change':
        setCacheGauges(metrics, this.cache);
        this.opts.onTableChange();
        break;
      default:
        break;
    }
  }
}
