import type { BufferPool } from '../../common/buffer-pool.js';

/**
 * A request body's buffer taken from the router's pool, sized by its Content-Length, and the
 * count of those still reading it: the exchange until it has ended, and each try whose write of
 * the body to a replica has not finished (a replica may answer before it has read the body, and
 * the socket still sends it). It goes back to the pool when the last lets go: a buffer reused
 * while a write still sends it would send another request's bytes (docs/adr/0051).
 */
export class BodyBuffer {
  private holders = 1;

  constructor(
    private readonly pool: BufferPool,
    /** At least the body's declared length; the body is its first bytes. */
    readonly bytes: Buffer,
  ) {}

  static take(pool: BufferPool, length: number): BodyBuffer {
    return new BodyBuffer(pool, pool.take(length));
  }

  /** One more reader (a try's write) that calls `release` when done. */
  retain(): void {
    this.holders++;
  }

  release(): void {
    if (--this.holders === 0) this.pool.give(this.bytes);
  }
}
