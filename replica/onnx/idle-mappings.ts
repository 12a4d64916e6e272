import type { FileMapper } from './file-map.js';

/**
 * Mappings of released models kept for their next load, newest last, bounded by bytes.
 *
 * Under traffic that loads on most requests, a mapped load's own cost was the kernel's: a
 * mapping, a page-table entry filled for every page the first run touches, and an unmapping
 * (about 0.1 ms of a 5 MB model's load, more than the JavaScript around it). A model reloaded
 * while its mapping is parked here gets the mapping back with its page tables filled. A parked
 * mapping holds no memory of its own, only page tables: its pages are the page cache's, the same
 * pages the disk cache's file holds. It is not a loaded model either: nothing serves from it,
 * and the cache's slots and the router's table are as before (docs/adr/0024-idle-mappings.md).
 *
 * Only files the replica owns are mapped (LocalModelFile.private); the store calls `forget`
 * when it deletes one, so a parked mapping never keeps a deleted file's blocks on the disk.
 */
export class IdleMappings implements FileMapper {
  private readonly idle = new Map<string, ArrayBuffer>();
  private idleBytes = 0;
  /** The file each buffer in use or parked maps: `unmap` parks it under that path. */
  private readonly paths = new WeakMap<ArrayBuffer, string>();
  /** Buffers in use per file, and the files deleted while in use: those are unmapped, not parked, on release. */
  private readonly inUse = new Map<string, number>();
  private readonly deleted = new Set<string>();

  constructor(
    private readonly mapper: FileMapper,
    private readonly maxIdleBytes: number,
    private readonly onReuse: () => void = () => undefined,
  ) {}

  get parkedBytes(): number {
    return this.idleBytes;
  }

  map(path: string): ArrayBuffer {
    this.inUse.set(path, (this.inUse.get(path) ?? 0) + 1);
    const parked = this.idle.get(path);
    if (parked) {
      this.idle.delete(path);
      this.idleBytes -= parked.byteLength;
      this.onReuse();
      return parked;
    }
    let buffer: ArrayBuffer;
    try {
      buffer = this.mapper.map(path);
    } catch (err) {
      this.release(path);
      throw err;
    }
    this.paths.set(buffer, path);
    return buffer;
  }

  /** Parks the buffer for the next load of its file; views of it must not be used by the caller afterwards. */
  unmap(buffer: ArrayBuffer): void {
    const path = this.paths.get(buffer);
    // A buffer this pool did not make (or already unmapped) is the mapper's to unmap.
    if (path === undefined) return this.mapper.unmap(buffer);
    if (this.idle.get(path) === buffer) return; // parked already
    const deleted = this.deleted.has(path);
    this.release(path);
    // The same file loaded twice at once (a model reloaded while its evicted copy finished a
    // request) parks one mapping.
    if (deleted || this.idle.has(path) || buffer.byteLength > this.maxIdleBytes) {
      this.paths.delete(buffer);
      return this.mapper.unmap(buffer);
    }
    this.idle.set(path, buffer);
    this.idleBytes += buffer.byteLength;
    for (const [oldest, old] of this.idle) {
      if (this.idleBytes <= this.maxIdleBytes) break;
      this.drop(oldest, old);
    }
  }

  /** The file is being deleted: its parked mapping, if any, goes now. */
  forget(path: string): void {
    const parked = this.idle.get(path);
    if (parked) this.drop(path, parked);
    if (this.inUse.has(path)) this.deleted.add(path);
  }

  private release(path: string): void {
    const n = (this.inUse.get(path) ?? 1) - 1;
    if (n > 0) return void this.inUse.set(path, n);
    this.inUse.delete(path);
    this.deleted.delete(path);
  }

  private drop(path: string, buffer: ArrayBuffer): void {
    this.idle.delete(path);
    this.paths.delete(buffer);
    this.idleBytes -= buffer.byteLength;
    this.mapper.unmap(buffer);
  }
}
