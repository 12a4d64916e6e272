import { LRUCache } from 'lru-cache';

/** A downloaded model file kept on local disk, and the store version it was downloaded at. */
export interface CachedFile {
  path: string;
  bytes: number;
  /** The store's ETag for the object when it was downloaded: a reload revalidates against it. */
  etag: string;
  /** When the store last confirmed this version (download or HEAD), by the injected clock. */
  checkedAt: number;
  /** The model's config.json as downloaded with it (small: kept in memory). */
  config?: Uint8Array;
}

interface Slot extends CachedFile {
  /** Loads reading this file right now: it is deleted only after the last one settles. */
  pins: number;
  /** Out of the index: deleted as soon as `pins` drops to zero. */
  dropped: boolean;
}

/**
 * The second tier of the replica's cache: model files on local disk, an LRU bounded by bytes,
 * far larger than the set of loaded sessions. An evicted model reloads from here (a HEAD to
 * revalidate, then a session) instead of downloading again, as SageMaker multi-model endpoints
 * keep unloaded models on the instance's disk. Ray Serve's multiplexing guide reloads from the
 * store every time.
 *
 * Pure bookkeeping: `remove` deletes a file and is injected, so the policy is tested without a
 * disk. A file being read by a load is pinned and outlives its eviction until the load settles.
 */
export class DiskFileCache {
  private readonly index: LRUCache<string, Slot>;

  constructor(
    readonly maxBytes: number,
    private readonly remove: (path: string) => void,
  ) {
    this.index = new LRUCache<string, Slot>({
      // lru-cache needs a positive bound; with 0 nothing is admitted (see admit).
      maxSize: Math.max(1, maxBytes),
      sizeCalculation: (s) => Math.max(1, s.bytes),
      // Every download has its own path, so a replaced slot's file is deleted like an evicted one.
      dispose: (slot) => this.drop(slot),
    });
  }

  get size(): number {
    return this.index.size;
  }

  get bytes(): number {
    return this.index.calculatedSize;
  }

  /** The ids of the cached files, most recently used first, at most `limit`. */
  ids(limit: number): string[] {
    const out: string[] = [];
    for (const id of this.index.keys()) {
      if (out.length >= limit) break;
      out.push(id);
    }
    return out;
  }

  /** The cached file of `id`, pinned, or undefined. Counts as a use for the LRU. */
  checkout(id: string): CachedFile | undefined {
    const slot = this.index.get(id);
    if (slot === undefined) return undefined;
    slot.pins++;
    return slot;
  }

  /**
   * Records a fresh download of `id`, pinned for the load about to read it. A file larger than
   * the whole cache is not kept: it is deleted once its load settles.
   */
  admit(id: string, file: CachedFile): CachedFile {
    const slot: Slot = { ...file, pins: 1, dropped: false };
    if (file.bytes > this.maxBytes) {
      this.index.delete(id);
      slot.dropped = true;
      return slot;
    }
    this.index.set(id, slot);
    return slot;
  }

  /** The store has just confirmed that `file` is still its current version. */
  confirm(file: CachedFile, now: number): void {
    (file as Slot).checkedAt = now;
  }

  /**
   * The load that checked `id` out is over. `keep` false (the store no longer has it, or
   * onnxruntime refused it) drops the file, so a broken model is never served from disk.
   */
  settle(id: string, file: CachedFile, keep: boolean): void {
    const slot = file as Slot;
    slot.pins--;
    // Deleting from the index disposes the slot, which removes the file once unpinned.
    if (!keep && this.index.peek(id) === slot) this.index.delete(id);
    else if (slot.dropped && slot.pins === 0) this.remove(slot.path);
  }

  /**
   * The disk is full: drops every file that no load is reading and whose model `keep` does not
   * name (the models still loaded, whose files a reload would want first). Answers how many
   * bytes of files it dropped; they are deleted through `remove` as usual.
   */
  shed(keep: (id: string) => boolean): number {
    let bytes = 0;
    for (const [id, slot] of [...this.index.entries()]) {
      if (slot.pins > 0 || keep(id)) continue;
      bytes += slot.bytes;
      this.index.delete(id);
    }
    return bytes;
  }

  private drop(slot: Slot): void {
    slot.dropped = true;
    if (slot.pins === 0) this.remove(slot.path);
  }
}
