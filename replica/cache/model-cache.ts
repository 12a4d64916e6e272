import { LRUCache } from 'lru-cache';
import type { Clock } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import type { CachePolicy } from '../../common/resource.js';
import { FrequencySketch } from './frequency-sketch.js';

/** Something the cache holds and must free exactly once, e.g. an onnxruntime session. */
export interface Releasable {
  release(): Promise<void>;
}

export interface Loaded<T> {
  value: T;
  /** Counted against `maxBytes`. */
  bytes: number;
  /** Which version of the model was loaded (an ETag), opaque to the cache; absent when unknown. */
  version?: string;
  /** When the store last confirmed `version`, by the injected clock. */
  checkedAt?: number;
}

/** A loaded model's version and when the store last confirmed it: what revalidation works from. */
export interface LoadedVersion {
  id: string;
  version: string;
  checkedAt: number;
}

/** What the cache reports, for logs and metrics; never throws back into the cache. */
export type CacheEvent =
  | { type: 'load-start'; id: string }
  | { type: 'load-end'; id: string; ok: true; durationMs: number; bytes: number }
  | { type: 'load-end'; id: string; ok: false; durationMs: number; error: unknown }
  /** `not_admitted`: loaded for the requests that asked, then let go (policy `frequency`). */
  | { type: 'evict'; id: string; inUse: number; reason: 'capacity' | 'not_admitted' }
  | { type: 'release'; id: string; durationMs: number; error?: unknown }
  /** A new version loaded beside the old one and swapped in (`ok`), or its load failed and the old one stays. */
  | { type: 'swap'; id: string; ok: true; durationMs: number; bytes: number; inUse: number }
  | { type: 'swap'; id: string; ok: false; durationMs: number; error: unknown }
  | { type: 'change' };

/** Requests per cache slot between two halvings of the frequency counts. */
const FREQUENCY_WINDOW_PER_SLOT = 32;

export interface ModelCacheOptions<T> {
  /** Models kept loaded at most. */
  maxModels: number;
  /** Optional bound on the sum of `bytes` of loaded models. */
  maxBytes?: number;
  /** Loads of different ids running at once at most; further loads queue. */
  maxConcurrentLoads: number;
  /**
   * `lru` (Ray Serve's): every loaded model enters, evicting the least recently used.
   * `frequency`: a loaded model enters a full cache only if it was asked for at least as often
   * lately as the model it would evict; otherwise it serves the requests that asked for it and
   * is released. Under skewed traffic a run of rare models no longer flushes the popular ones.
   */
  policy?: CachePolicy;
  /** `fresh`: a new version is wanted; the loader must not reuse a copy on the strength of an earlier check. */
  load: (id: string, fresh: boolean) => Promise<Loaded<T>>;
  clock: Clock;
  onEvent?: (e: CacheEvent) => void;
}

/** A model in use by one request; `done()` must be called exactly once. */
export interface Lease<T> {
  value: T;
  /** True when the model was loaded before this request asked for it. */
  hit: boolean;
  done(): void;
}

interface Entry<T> {
  id: string;
  value: T;
  bytes: number;
  version: string | undefined;
  checkedAt: number;
  /** Requests that hold a lease on it. */
  refs: number;
  /** Out of the LRU: released as soon as `refs` drops to zero. */
  evicted: boolean;
  released: boolean;
}

/**
 * The model cache: an LRU bounded by count and optionally bytes, with Ray Serve's faults fixed.
 * - One load per id however many requests wait for it (single flight); different ids load
 *   concurrently up to `maxConcurrentLoads`.
 * - The new model is inserted (and so the LRU victim chosen) only once it has loaded, so a
 *   failed load evicts nothing, and a failed load is never cached.
 * - A victim is released only when no request holds it any more; if it is asked for again
 *   before that, it goes back into the LRU instead of loading twice.
 * Pure of I/O: the loader, the clock and the event sink are injected.
 */
export class ModelCache<T extends Releasable> {
  private readonly lru: LRUCache<string, Entry<T>>;
  private readonly loading = new Map<string, Promise<Entry<T>>>();
  private readonly swapping = new Map<string, Promise<boolean>>();
  /** Evicted entries still used by a request. */
  private readonly draining = new Map<string, Entry<T>>();
  private readonly releases = new Set<Promise<void>>();
  private activeLoads = 0;
  private readonly loadQueue: (() => void)[] = [];
  private readonly frequency: FrequencySketch | undefined;
  private versionValue = 0;
  /** The sum of `bytes` of the LRU's entries, kept as they enter and leave: read on every change. */
  private bytesLoaded = 0;
  private closed = false;

  constructor(private readonly opts: ModelCacheOptions<T>) {
    this.frequency = opts.policy === 'frequency' ? new FrequencySketch(FREQUENCY_WINDOW_PER_SLOT * opts.maxModels) : undefined;
    this.lru = new LRUCache<string, Entry<T>>({
      max: opts.maxModels,
      ...(opts.maxBytes !== undefined ? { maxSize: opts.maxBytes, sizeCalculation: (e: Entry<T>) => Math.max(1, e.bytes) } : {}),
      dispose: (entry, _key, reason) => {
        this.bytesLoaded -= entry.bytes;
        if (reason === 'evict' || reason === 'delete') this.retire(entry, 'capacity');
      },
    });
  }

  /** Grows with every change of the loaded or loading sets. */
  get version(): number {
    return this.versionValue;
  }

  get loadedIds(): string[] {
    return [...this.lru.keys()];
  }

  get loadingIds(): string[] {
    return [...this.loading.keys()];
  }

  get loadedCount(): number {
    return this.lru.size;
  }

  get loadingCount(): number {
    return this.loading.size;
  }

  get loadedBytes(): number {
    return this.bytesLoaded;
  }

  /** Leases held on evicted models not yet released. */
  get drainingIds(): string[] {
    return [...this.draining.keys()];
  }

  has(id: string): boolean {
    return this.lru.has(id);
  }

  /** The versions of the loaded models that have one. */
  versions(): LoadedVersion[] {
    const out: LoadedVersion[] = [];
    for (const e of this.lru.values()) if (e.version !== undefined) out.push({ id: e.id, version: e.version, checkedAt: e.checkedAt });
    return out;
  }

  /** The store was asked about the loaded version of `id` at `at` (whatever it answered): it is due again an interval later. */
  checked(id: string, version: string, at: number): void {
    const e = this.lru.peek(id);
    if (e?.version === version) e.checkedAt = at;
  }

  /**
   * Loads `id` again beside its loaded version and swaps the new one in: the model changed in
   * the store. A request holds the version it leased to its end, so requests in flight finish
   * on the old version, every request that acquires after the swap gets the new one, and none
   * sees both; the old version is released after its last request. Resolves false, the old
   * version serving on, when the load fails (a broken upload is never swapped in) or the model
   * left the cache meanwhile. One swap per id at a time; it takes a load slot like any load.
   */
  swap(id: string): Promise<boolean> {
    let pending = this.swapping.get(id);
    if (!pending) {
      pending = this.loadAndSwap(id).finally(() => this.swapping.delete(id));
      this.swapping.set(id, pending);
    }
    return pending;
  }

  /** Returns the model, loading it if needed; rejects with the load's error (not cached). */
  async acquire(id: string): Promise<Lease<T>> {
    if (this.closed) throw new ModelmuxError('shutting_down', 'the replica is shutting down');
    this.frequency?.add(id);
    const cached = this.lru.get(id);
    if (cached) return this.lease(cached, true);
    const back = this.draining.get(id);
    if (back) {
      // Evicted while still in use and wanted again: keep the same session rather than load
      // twice, and give it another chance to enter.
      if (this.admits(id, back.bytes)) {
        this.draining.delete(id);
        back.evicted = false;
        this.insert(back);
      }
      return this.lease(back, true);
    }
    let pending = this.loading.get(id);
    if (!pending) {
      pending = this.startLoad(id);
      this.loading.set(id, pending);
      this.changed();
    }
    const entry = await pending;
    // Evicted by later loads before this waiter resumed (tiny caches under churn): load again.
    if (entry.released) return this.acquire(id);
    return this.lease(entry, false);
  }

  /**
   * Takes `id` out of the cache (released after the requests holding it): what it was loaded
   * into lost it, e.g. a sidecar's runtime restarted. The next request loads it again.
   */
  evict(id: string): void {
    // lru-cache disposes of an entry before it leaves: the change retire() reported still counted it.
    if (this.lru.delete(id)) this.changed();
  }

  /** Evicts everything and waits for every session to be released (after in-flight requests). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.loading.values()]);
    this.lru.clear();
    await Promise.allSettled([...this.releases]);
    while (this.releases.size > 0) await Promise.allSettled([...this.releases]);
  }

  private lease(entry: Entry<T>, hit: boolean): Lease<T> {
    entry.refs++;
    let done = false;
    return {
      value: entry.value,
      hit,
      done: () => {
        if (done) return;
        done = true;
        entry.refs--;
        if (entry.refs === 0 && entry.evicted) this.release(entry);
      },
    };
  }

  private async startLoad(id: string): Promise<Entry<T>> {
    await this.loadSlot();
    const started = this.opts.clock.now();
    this.emit({ type: 'load-start', id });
    try {
      const loaded = await this.opts.load(id, false);
      if (this.opts.maxBytes !== undefined && loaded.bytes > this.opts.maxBytes) {
        await loaded.value.release().catch(() => undefined);
        throw new ModelmuxError('model_too_large', `model "${id}" weighs ${loaded.bytes} bytes, more than the ${this.opts.maxBytes} this replica may hold`);
      }
      const entry = this.entry(id, loaded);
      this.emit({ type: 'load-end', id, ok: true, durationMs: this.opts.clock.now() - started, bytes: loaded.bytes });
      this.loading.delete(id);
      if (this.admits(id, loaded.bytes)) this.insert(entry);
      else {
        // Released once the requests waiting for it are served: each leases it before any
        // lease can end, since they resume together when the load settles.
        this.retire(entry, 'not_admitted');
      }
      return entry;
    } catch (error) {
      this.emit({ type: 'load-end', id, ok: false, durationMs: this.opts.clock.now() - started, error });
      this.loading.delete(id);
      this.changed();
      throw error;
    } finally {
      this.freeSlot();
    }
  }

  private entry(id: string, loaded: Loaded<T>): Entry<T> {
    return { id, value: loaded.value, bytes: loaded.bytes, version: loaded.version, checkedAt: loaded.checkedAt ?? this.opts.clock.now(), refs: 0, evicted: false, released: false };
  }

  private async loadAndSwap(id: string): Promise<boolean> {
    if (this.closed || !this.lru.has(id)) return false;
    await this.loadSlot();
    const started = this.opts.clock.now();
    try {
      let loaded: Loaded<T>;
      try {
        loaded = await this.opts.load(id, true);
      } catch (error) {
        this.emit({ type: 'swap', id, ok: false, durationMs: this.opts.clock.now() - started, error });
        return false;
      }
      const fresh = this.entry(id, loaded);
      const old = this.lru.peek(id);
      if (this.opts.maxBytes !== undefined && loaded.bytes > this.opts.maxBytes) {
        this.release(fresh);
        const error = new ModelmuxError('model_too_large', `the new version of model "${id}" weighs ${loaded.bytes} bytes, more than the ${this.opts.maxBytes} this replica may hold`);
        this.emit({ type: 'swap', id, ok: false, durationMs: this.opts.clock.now() - started, error });
        return false;
      }
      if (old === undefined || this.closed) {
        // Evicted while the new version loaded: nothing to replace, and a request that wants the
        // model again loads it like any other.
        this.release(fresh);
        return false;
      }
      // set() replaces the old entry (disposed with reason 'set', which only takes its bytes off)
      // and makes the model the most recently used: it was loaded a moment ago.
      this.bytesLoaded += fresh.bytes;
      this.lru.set(id, fresh);
      old.evicted = true;
      this.emit({ type: 'swap', id, ok: true, durationMs: this.opts.clock.now() - started, bytes: fresh.bytes, inUse: old.refs });
      // Never into `draining`: a later acquire must not take the old version back.
      if (old.refs === 0) this.release(old);
      this.changed();
      return true;
    } finally {
      this.freeSlot();
    }
  }

  private insert(entry: Entry<T>): void {
    this.bytesLoaded += entry.bytes;
    this.lru.set(entry.id, entry);
    this.changed();
  }

  /**
   * Whether `id` (weighing `bytes`) may enter now: always under `lru` or with room, else only
   * if it was asked for at least as often as every model its entry would evict: the least
   * recently used ones, as many as the model count and the byte bound need.
   */
  private admits(id: string, bytes: number): boolean {
    if (!this.frequency) return true;
    const maxBytes = this.opts.maxBytes;
    let models = this.lru.size + 1;
    // The LRU's own size function, so this walks exactly the entries its set() will evict.
    let size = maxBytes === undefined ? 0 : this.lru.calculatedSize + Math.max(1, bytes);
    const wanted = this.frequency.count(id);
    for (const victim of this.lru.rvalues()) {
      if (victim === undefined) break;
      if (models <= this.opts.maxModels && (maxBytes === undefined || size <= maxBytes)) break;
      if (this.frequency.count(victim.id) > wanted) return false;
      models--;
      size -= Math.max(1, victim.bytes);
    }
    return true;
  }

  /** Called by the LRU when an entry leaves it, and for a load that was not admitted. */
  private retire(entry: Entry<T>, reason: 'capacity' | 'not_admitted'): void {
    entry.evicted = true;
    this.emit({ type: 'evict', id: entry.id, inUse: entry.refs, reason });
    if (entry.refs === 0 && reason === 'capacity') this.release(entry);
    else this.draining.set(entry.id, entry);
    this.changed();
  }

  private release(entry: Entry<T>): void {
    if (entry.released) return;
    entry.released = true;
    if (this.draining.get(entry.id) === entry) this.draining.delete(entry.id);
    const started = this.opts.clock.now();
    const p = entry.value.release().then(
      () => this.emit({ type: 'release', id: entry.id, durationMs: this.opts.clock.now() - started }),
      (error: unknown) => this.emit({ type: 'release', id: entry.id, durationMs: this.opts.clock.now() - started, error }),
    );
    this.releases.add(p);
    void p.finally(() => this.releases.delete(p));
  }

  private loadSlot(): Promise<void> {
    if (this.activeLoads < this.opts.maxConcurrentLoads) {
      this.activeLoads++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.loadQueue.push(resolve));
  }

  private freeSlot(): void {
    const next = this.loadQueue.shift();
    if (next) next();
    else this.activeLoads--;
  }

  private changed(): void {
    this.versionValue++;
    this.emit({ type: 'change' });
  }

  private emit(e: CacheEvent): void {
    try {
      this.opts.onEvent?.(e);
    } catch {
      // A faulty observer must not corrupt the cache's bookkeeping.
    }
  }
}
