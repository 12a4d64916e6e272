/** Request bodies of at least this many bytes are read into pooled buffers (replica and router alike). */
export const POOLED_BODY_BYTES = 64 * 1024;

/** Free body buffers a program keeps while idle: enough for a few large requests at once (docs/limits.md). */
export const BODY_POOL_BUFFERS = 4;
export const BODY_POOL_BYTES = 64 * 1024 ** 2;

/**
 * Reuses large buffers: a replica's model files and request bodies, the router's request bodies. A multiplexing replica reads a file of about
 * the same size on every load and drops one on every eviction; fresh buffers of megabytes cost
 * page faults and, being memory V8 accounts for, full garbage collections — together more than
 * the read itself (docs/adr/0016-shared-graph-sessions.md, docs/adr/0051-replica-request-path.md).
 */
export class BufferPool {
  private readonly free: Buffer[] = [];
  private freeBytes = 0;

  /** Buffers kept while no model uses them, at most `maxFree` and `maxFreeBytes`; the oldest go first. */
  constructor(
    private readonly maxFree: number,
    private readonly maxFreeBytes: number,
  ) {}

  /** A buffer of at least `size` bytes, not zero-filled. */
  take(size: number): Buffer {
    // Rounded up so files that differ by a few bytes (names, producer strings) reuse each other's.
    const rounded = Math.ceil(size / 65536) * 65536;
    let best = -1;
    this.free.forEach((b, i) => {
      // A much larger buffer is left for a larger file rather than pinned under a small one; one
      // this pool would allocate for `size` always fits.
      if (b.length >= size && b.length <= rounded * 1.25 && (best < 0 || b.length < (this.free[best] as Buffer).length)) best = i;
    });
    if (best >= 0) {
      const b = this.free.splice(best, 1)[0] as Buffer;
      this.freeBytes -= b.length;
      return b;
    }
    return Buffer.allocUnsafeSlow(rounded);
  }

  /** Gives a buffer back; the caller must no longer read it, nor anything viewing it. */
  give(buffer: Buffer): void {
    this.free.push(buffer);
    this.freeBytes += buffer.length;
    while (this.free.length > this.maxFree || this.freeBytes > this.maxFreeBytes) this.freeBytes -= (this.free.shift() as Buffer).length;
  }

  get freeCount(): number {
    return this.free.length;
  }
}
