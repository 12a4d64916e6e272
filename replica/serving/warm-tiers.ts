import { readFile } from 'node:fs/promises';
import { LRUCache } from 'lru-cache';
import type { Clock } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import type { ModelId } from '../../common/model-id.js';
import { HostTier, hostTierUse } from '../cache/host-tier.js';
import { externalDataFiles } from '../onnx/external-data.js';
import type { LocalModelFile, ModelStore } from '../store/model-store.js';

/** The tier a load's bytes came from: the label values of the loads-by-tier metrics. */
export type LoadTier = 'host' | 'disk' | 'peer' | 'store';
export const LOAD_TIERS: readonly LoadTier[] = ['host', 'disk', 'peer', 'store'];

/** What a load got: the model's bytes from host memory, or its file from the store (through the disk cache). */
export type ModelSource =
  | { tier: 'host'; bytes: Uint8Array; version: string; checkedAt: number; config: Uint8Array | undefined }
  | { tier: Exclude<LoadTier, 'host'>; file: LocalModelFile };

export interface WarmTiersOptions {
  /** Bytes of model files kept in host memory; 0 turns the tier off. */
  maxBytes: number;
  store: ModelStore;
  /** The store's version of a model now (VersionedStore.version); absent: the tier stays off. */
  version: ((id: ModelId) => Promise<string>) | undefined;
  /** As the disk cache's: bytes the store confirmed less than this long ago are used without asking. */
  revalidateAfterMs: number;
  /** Whether the model is loaded now: a demotion that finds it loaded again keeps nothing. */
  isLoaded: (id: string) => boolean;
  clock: Clock;
  /** The set of ids the tier holds changed. */
  onChange: () => void;
  readFile?: (path: string) => Promise<Uint8Array>;
}

/** Where a loaded model's bytes can be read again when it is evicted, and which version they are. */
interface Origin {
  path: string;
  /** The replica's own download: never rewritten, so its bytes are the version it was loaded at. */
  private: boolean;
  version: string;
  checkedAt: number;
  config: Uint8Array | undefined;
}

/**
 * Origins remembered beyond the loaded models: loads the cache did not keep (too large for its
 * byte bound) leave theirs until the next load of the id, so the map is bounded on its own.
 */
const SPARE_ORIGINS = 256;

/**
 * A load's way down the tiers (ADR 0047): host memory, then the store's fetch, which tries the
 * disk cache and the neighbours' downloads before the store itself. A model evicted from the
 * device is demoted: its file is read back into host memory (the page cache has it, having just
 * served the load), so its next load reads no file and, within the revalidation window, asks
 * the store nothing. Bytes the store has not confirmed for `revalidateAfterMs` are checked
 * against its version first; a changed or deleted model is dropped from the tier, never served.
 */
export class WarmTiers {
  readonly tier: HostTier;
  private readonly origins: LRUCache<string, Origin>;
  private readonly read: (path: string) => Promise<Uint8Array>;
  private readonly demotions = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly opts: WarmTiersOptions,
    maxModels: number,
  ) {
    this.tier = new HostTier(opts.version === undefined ? 0 : opts.maxBytes);
    this.origins = new LRUCache({ max: maxModels + SPARE_ORIGINS });
    this.read = opts.readFile ?? readFile;
  }

  /** The model's bytes for a load: from host memory when held and current, else from the store. `fresh` as ModelStore.fetch. */
  async source(id: ModelId, fresh: boolean): Promise<ModelSource> {
    const held = this.tier.get(id);
    if (held !== undefined && this.opts.version !== undefined) {
      let current = held.version;
      const now = this.opts.clock.now();
      if (hostTierUse(held, now, this.opts.revalidateAfterMs, fresh) === 'revalidate') {
        try {
          current = await this.opts.version(id);
        } catch (err) {
          if (err instanceof ModelmuxError && err.code === 'model_not_found') this.forget(id);
          // The store cannot be asked: its fetch decides, serving a disk copy unverified or failing,
          // as it would without this tier. Bytes from memory are never served unconfirmed.
          return this.fromStore(id, fresh);
        }
        if (current === held.version) this.tier.confirm(id, current, now);
      }
      if (current === held.version) return { tier: 'host', bytes: held.bytes, version: held.version, checkedAt: held.checkedAt, config: held.config };
      this.forget(id);
      // Changed in the store: the disk copy is of the old version too, so the store is asked.
      return this.fromStore(id, true);
    }
    return this.fromStore(id, fresh);
  }

  /**
   * The load of `id` from `source` succeeded: remembers where its bytes can be read again, and
   * drops host bytes of another version (the store moved on).
   */
  loaded(id: string, source: ModelSource, origin: { path: string; private: boolean } | undefined): void {
    const version = source.tier === 'host' ? source.version : source.file.version?.tag;
    const held = this.tier.get(id);
    if (held !== undefined && held.version !== version) this.forget(id);
    if (version === undefined || this.tier.maxBytes === 0) return;
    if (source.tier === 'host') {
      // Loaded from memory: the tier holds the bytes; an origin of that version stays for when they leave it.
      if (this.origins.peek(id)?.version !== version) this.origins.delete(id);
      return;
    }
    if (origin === undefined) return;
    const { file } = source;
    this.origins.set(id, { ...origin, version, checkedAt: file.version?.checkedAt ?? this.opts.clock.now(), config: file.config });
  }

  /** The model left the device for room (`capacity`) or was let go (`not_admitted`, kept out of the tier). */
  evicted(id: string, reason: 'capacity' | 'not_admitted'): void {
    const origin = this.origins.get(id);
    if (this.closed || reason !== 'capacity' || origin === undefined || this.tier.holds(id, origin.version)) return;
    const p = this.demote(id, origin).catch(() => undefined);
    this.demotions.add(p);
    void p.finally(() => this.demotions.delete(p));
  }

  /** No further demotions: the replica is shutting down. */
  close(): void {
    this.closed = true;
  }

  /** Waits for the demotions under way. */
  async settled(): Promise<void> {
    while (this.demotions.size > 0) await Promise.allSettled([...this.demotions]);
  }

  /**
   * Reads the evicted model's file into the tier. A file of the user's (a file:// store) may
   * have changed since the load: it is kept only when the store names the same version before
   * and after the read. A model with external data files is not kept: its bytes alone do not
   * load. Nothing is kept when the model was loaded again meanwhile (its own eviction demotes
   * it). A file already deleted (the disk cache's eviction) fails the read: nothing is kept.
   */
  private async demote(id: string, origin: Origin): Promise<void> {
    const version = this.opts.version;
    if (version === undefined) return;
    if (!origin.private && (await version(id as ModelId)) !== origin.version) return;
    const bytes = await this.read(origin.path);
    let checkedAt = origin.checkedAt;
    if (!origin.private) {
      if ((await version(id as ModelId)) !== origin.version) return;
      checkedAt = this.opts.clock.now();
    }
    // Loaded again meanwhile, or another demotion of it got there first (it may be of a newer version).
    if (this.opts.isLoaded(id) || this.tier.versionOf(id) !== undefined || externalDataFiles(bytes).length > 0) return;
    if (this.tier.put(id, { bytes, version: origin.version, checkedAt, config: origin.config })) this.opts.onChange();
  }

  private async fromStore(id: ModelId, fresh: boolean): Promise<ModelSource> {
    const file = await this.opts.store.fetch(id, fresh);
    const source = file.source ?? 'store';
    return { tier: source === 'disk_unverified' ? 'disk' : source, file };
  }

  /** Drops the host bytes of `id`: changed or gone in the store, or refused by onnxruntime. */
  forget(id: string): void {
    this.tier.drop(id);
    this.opts.onChange();
  }
}
