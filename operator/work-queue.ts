import { backoffDelayMs, type BackoffPolicy } from '../common/backoff.js';

/**
 * A per-key work queue after client-go's typed workqueue: a key waits at most once in the
 * queue, is handed to one worker at a time (a key added while it is being processed is queued
 * again when that worker calls done), and failures back off exponentially per key. `K` is the
 * controller's own key type, so one controller's keys cannot reach another's queue.
 */

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemTimers: Timers = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    // A pending retry must not keep a stopping process alive.
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 200, maxMs: 60_000 };

export class WorkQueue<K extends string> {
  private readonly queue: K[] = [];
  private readonly queued = new Set<K>();
  private readonly processing = new Set<K>();
  /** Keys added while being processed: they go back in the queue on done(). */
  private readonly dirty = new Set<K>();
  private readonly failures = new Map<K, number>();
  private readonly delayed = new Map<K, { at: number; handle: unknown }>();
  private readonly waiters: ((key: K | undefined) => void)[] = [];
  private shuttingDown = false;

  constructor(
    private readonly timers: Timers = systemTimers,
    private readonly policy: BackoffPolicy = DEFAULT_BACKOFF,
    private readonly now: () => number = Date.now,
  ) {}

  add(key: K): void {
    if (this.shuttingDown) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      this.processing.add(key);
      waiter(key);
      return;
    }
    this.queued.add(key);
    this.queue.push(key);
  }

  /** Adds the key after `ms`; an earlier pending delay for the same key wins. */
  addAfter(key: K, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.now() + ms;
    const pending = this.delayed.get(key);
    if (pending !== undefined && pending.at <= at) return;
    if (pending !== undefined) this.timers.clearTimeout(pending.handle);
    const handle = this.timers.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, handle });
  }

  /** Re-adds a failed key after its exponential backoff; returns the delay chosen. */
  addRateLimited(key: K): number {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    const delay = backoffDelayMs(n, this.policy);
    this.addAfter(key, delay);
    return delay;
  }

  /** Resets the key's backoff after a success. */
  forget(key: K): void {
    this.failures.delete(key);
  }

  /** The next key, or undefined once shut down. The caller must call done(key). */
  get(): Promise<K | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.queued.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: K): void {
    this.processing.delete(key);
    if (this.dirty.delete(key)) this.add(key);
  }

  /** Keys waiting to be processed (not those delayed or in progress). */
  get length(): number {
    return this.queue.length;
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const { handle } of this.delayed.values()) this.timers.clearTimeout(handle);
    this.delayed.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
  }
}
