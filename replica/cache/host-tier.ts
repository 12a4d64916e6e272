import { LRUCache } from 'lru-cache';

/** A model file's bytes kept in host memory, and the store version they are. */
export interface HostEntry {
  bytes: Uint8Array;
  /** The store's version of the model (ETag, or the file store's inode tag) these bytes are. */
  version: string;
  /** When the store last confirmed `version`, by the injected clock. */
  checkedAt: number;
  /** The model's config.json as fetched with it; undefined when it has none. */
  config: Uint8Array | undefined;
}

/**
 * What a load does with a host-tier entry: serve it as it is, or ask the store for its version
 * first. The disk cache's rule (ADR 0015): within `revalidateAfterMs` of the store's last word
 * the bytes are served without asking; past it, or when the caller wants a fresh copy (a swap
 * to a new version), the store is asked, so a model changed in the store is never served from
 * memory longer than from disk.
 */
export function hostTierUse(entry: Pick<HostEntry, 'checkedAt'>, now: number, revalidateAfterMs: number, fresh: boolean): 'serve' | 'revalidate' {
  return !fresh && now - entry.checkedAt < revalidateAfterMs ? 'serve' : 'revalidate';
}

/**
 * The host-memory tier of the replica's cache (ADR 0047): the file bytes of the models loaded
 * lately, an LRU bounded by bytes, between the loaded sessions and the disk cache. A model
 * evicted from the device keeps its bytes here (it is demoted, not dropped), and its reload
 * reads no file and asks the store nothing within the revalidation window. The bytes of loaded
 * models count against the bound too: their eviction then costs no read, and nothing but the
 * bound decides what host memory the tier takes.
 *
 * Pure bookkeeping: no I/O, the clock's readings are passed in. `version` grows with every
 * change of the set of ids, for the published table.
 */
export class HostTier {
  private readonly lru: LRUCache<string, HostEntry>;
  private changes = 0;

  constructor(readonly maxBytes: number) {
    // lru-cache needs a positive bound; with 0 nothing is admitted (see put).
    this.lru = new LRUCache<string, HostEntry>({
      maxSize: Math.max(1, maxBytes),
      sizeCalculation: (e) => Math.max(1, e.bytes.length),
      dispose: () => this.changes++,
    });
  }

  get version(): number {
    return this.changes;
  }

  get bytes(): number {
    return this.lru.calculatedSize;
  }

  get size(): number {
    return this.lru.size;
  }

  /** The entry of `id`, counted as a use, or undefined. */
  get(id: string): HostEntry | undefined {
    return this.lru.get(id);
  }

  /** The version held of `id`, not counted as a use. */
  versionOf(id: string): string | undefined {
    return this.lru.peek(id)?.version;
  }

  /**
   * Keeps `entry` as the most recently used, evicting the least recently used entries past the
   * bound. An entry larger than the whole tier is not kept (and takes nothing out).
   */
  put(id: string, entry: HostEntry): boolean {
    if (entry.bytes.length > this.maxBytes) return false;
    this.lru.set(id, entry);
    this.changes++;
    return true;
  }

  /** The store confirmed `version` of `id` at `now`. */
  confirm(id: string, version: string, now: number): void {
    const e = this.lru.peek(id);
    if (e?.version === version) e.checkedAt = now;
  }

  /** Drops `id`: it changed in the store, left it, or its bytes failed to load. */
  drop(id: string): void {
    this.lru.delete(id);
  }

  /** The ids held, most recently used first, leaving out those `skip` names, at most `limit`. */
  ids(limit: number, skip: (id: string) => boolean = () => false): string[] {
    const out: string[] = [];
    for (const id of this.lru.keys()) {
      if (out.length >= limit) break;
      if (!skip(id)) out.push(id);
    }
    return out;
  }
}
