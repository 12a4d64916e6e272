import { readFile } from 'node:fs/promises';
import type { Clock } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import type { ModelId } from '../../common/model-id.js';
import { HostTier, hostTierUse } from '../cache/host-tier.js';
import { externalDataFiles } from '../onnx/external-data.js';
import type { LocalModelFile, ModelStore } from '../store/model-store.js';

/** The tier a load's bytes came from: the label values of the loads-by-tier metrics. */
export type LoadTier = 'host' | 'disk' | 'peer' | 'store';

/** What a load got: the model's bytes from host memory, or its file from the store (through the disk cache). */
export type ModelSource = { tier: 'host'; bytes: Uint8Array; version: string; checkedAt: number; config: Uint8Array | undefined } | { tier: Exclude<LoadTier, 'host'>; file: LocalModelFile };

export interface WarmTiersOptions {
  /** Bytes of model files kept in host memory; 0 turns the tier off. */
  maxBytes: number;
  store: ModelStore;
  /** The store's version of a model now (VersionedStore.version); absent: the tier stays off. */
  version: ((id: ModelId) => Promise<string>) | undefined;
  /** As the disk cache's: bytes the store confirmed less than this long ago are used without asking. */
  revalidateAfterMs: number;
  clock: Clock;
  /** The set of ids the tier holds, or of those not loaded, changed. */
  onChange: () => void;
  /** Reads a model file whole (tests inject one); node's readFile by default. */
  readFile?: (path: string) => Promise<Uint8Array>;
}

/**
 * A load's way down the tiers (ADR 0047): host memory, then the store's fetch, which tries the
 * disk cache and the neighbours' downloads before the store itself. A model's file is read into
 * host memory as it is loaded (its session is then opened from those bytes, so the file is read
 * once either way), and its bytes stay when the model is evicted from the device: the model is
 * demoted, and its next load reads no file and, within the revalidation window, asks the store
 * nothing. Bytes the store has not confirmed for `revalidateAfterMs` are checked against its
 * version first; a changed or deleted model is dropped from the tier, never served.
 */
export class WarmTiers {
  readonly tier: HostTier;
  private readonly read: (path: string) => Promise<Uint8Array>;

  constructor(private readonly opts: WarmTiersOptions) {
    this.tier = new HostTier(opts.version === undefined ? 0 : opts.maxBytes);
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
   * The bytes of a file fetched for a load, read now (before the load settles: a disk cache of 0
   * deletes the file then) when the tier would keep them; undefined when it would not: the tier
   * is off, the store names no version, the file is larger than the tier, or the model has
   * external data files (its bytes alone do not load).
   */
  async capture(file: LocalModelFile): Promise<Uint8Array | undefined> {
    if (this.tier.maxBytes === 0 || file.version === undefined || file.bytes > this.tier.maxBytes) return undefined;
    let bytes: Uint8Array;
    try {
      bytes = await this.read(file.path);
    } catch {
      // The tier is an optimisation: the load goes on from the file, which gives its own error.
      return undefined;
    }
    return externalDataFiles(bytes).length > 0 ? undefined : bytes;
  }

  /**
   * The load of `id` from `source` succeeded, with the `captured` bytes of its file: keeps them.
   * Host bytes of another version are dropped: the store moved on.
   */
  loaded(id: string, source: ModelSource, captured: Uint8Array | undefined): void {
    if (source.tier === 'host') return;
    const version = source.file.version;
    if (captured !== undefined && version !== undefined && this.tier.put(id, { bytes: captured, version: version.tag, checkedAt: version.checkedAt, config: source.file.config })) {
      this.opts.onChange();
      return;
    }
    const held = this.tier.versionOf(id);
    if (held !== undefined && held !== version?.tag) this.forget(id);
  }

  /**
   * The model left the device for room: its bytes, if held, become the most recently used (the
   * host list of the table now names it). One let go for want of admission (policy `frequency`)
   * keeps its place: it was asked for too rarely to push others out.
   */
  evicted(id: string, reason: 'capacity' | 'not_admitted'): void {
    if (reason === 'capacity' && this.tier.get(id) !== undefined) this.opts.onChange();
  }

  /** Drops the host bytes of `id`: changed or gone in the store, or refused by onnxruntime. */
  forget(id: string): void {
    if (this.tier.versionOf(id) === undefined) return;
    this.tier.drop(id);
    this.opts.onChange();
  }

  private async fromStore(id: ModelId, fresh: boolean): Promise<ModelSource> {
    const file = await this.opts.store.fetch(id, fresh);
    const source = file.source ?? 'store';
    return { tier: source === 'disk_unverified' ? 'disk' : source, file };
  }
}
