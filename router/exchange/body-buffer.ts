import type { BufferPool } from '../../common/buffer-pool.js';

/**
 * A request body's buffer taken from the router's pool, sized by its Content-Length, and the
 * count of those still reading it: the exchange until it has ended, and each try whose write of
 * the body to a replica has not finished (a replica may answer before it has read the body, and
 * the socket still sends it). It goes back to the pool when the last lets go: a buffer reused
 * while a write still sends it would send another request's bytes (docs/adr/0051).
 *
 * A body cut through to its replica while it arrives (docs/adr/0051, "Router cut-through") is
 * followed: the try in flight is told of each piece as it lands here, and a retry replays what is
 * here, then follows. A try answered before its body was all sent follows on to the body's end.
 */
export interface BodyFollower {
  /** More bytes were appended. */
  more(): void;
  /** The body will not be completed (the client gave up or was given up on). */
  cut(): void;
}

export class BodyBuffer {
  private holders = 1;
  /** The body's bytes in `bytes` so far. */
  received = 0;
  private follower: BodyFollower | undefined;

  constructor(
    private readonly pool: BufferPool,
    /** At least the body's declared length; the body is its first bytes. */
    readonly bytes: Buffer,
  ) {}

  static take(pool: BufferPool, length: number): BodyBuffer {
    return new BodyBuffer(pool, pool.take(length));
  }

  /** Copies the next piece of the body in (the caller checked it fits) and tells the follower. */
  append(chunk: Buffer): void {
    chunk.copy(this.bytes, this.received);
    this.received += chunk.length;
    this.follower?.more();
  }

  /**
   * Told of each piece appended from now on. One follower at a time: a retry's try takes over from
   * a try that was answered (refused) before the body was all sent, which is cut.
   */
  follow(f: BodyFollower): void {
    const before = this.follower;
    this.follower = f;
    if (before !== undefined && before !== f) before.cut();
  }

  unfollow(f: BodyFollower): void {
    if (this.follower === f) this.follower = undefined;
  }

  get followed(): boolean {
    return this.follower !== undefined;
  }

  /** The rest of the body will not come: its follower stops. */
  abandon(): void {
    const f = this.follower;
    this.follower = undefined;
    f?.cut();
  }

  /** One more reader (a try's write) that calls `release` when done. */
  retain(): void {
    this.holders++;
  }

  release(): void {
    if (--this.holders === 0) this.pool.give(this.bytes);
  }
}
