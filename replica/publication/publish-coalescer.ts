import type { Clock } from '../../common/clock.js';

export interface CoalescerOptions {
  /** Shortest gap between the starts of two publications. */
  minIntervalMs: number;
  /** Longest wait after failures (the gap doubles per failure up to this). */
  maxBackoffMs: number;
  clock: Clock;
  /** Timer, injected so tests can step time. Returns a cancel function. */
  schedule: (fn: () => void, ms: number) => () => void;
  /** Sends the latest state; reads it at call time, so one call covers every change before it. */
  publish: () => Promise<void>;
}

/**
 * Coalesces change notifications into publications: at most one in flight, at most one per
 * `minIntervalMs` however fast the model set churns, the latest state always sent last, and a
 * failed publication retried with backoff. So a replica cannot flood the API server.
 */
export class PublishCoalescer {
  private dirty = false;
  private inFlight: Promise<void> | undefined;
  private cancelTimer: (() => void) | undefined;
  private lastStart = Number.NEGATIVE_INFINITY;
  private failures = 0;
  private stopped = false;

  constructor(private readonly opts: CoalescerOptions) {}

  notify(): void {
    if (this.stopped) return;
    this.dirty = true;
    this.pump();
  }

  /** Sends pending changes now (ignoring the interval) and waits; for shutdown. */
  async flush(): Promise<void> {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    if (this.inFlight) await this.inFlight;
    if (this.dirty) {
      this.dirty = false;
      await this.opts.publish().catch(() => undefined);
    }
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  private gap(): number {
    if (this.failures === 0) return this.opts.minIntervalMs;
    return Math.min(this.opts.maxBackoffMs, Math.max(this.opts.minIntervalMs, 100) * 2 ** Math.min(this.failures, 20));
  }

  private pump(): void {
    if (this.stopped || !this.dirty || this.inFlight || this.cancelTimer) return;
    const wait = this.lastStart + this.gap() - this.opts.clock.now();
    if (wait > 0) {
      this.cancelTimer = this.opts.schedule(() => {
        this.cancelTimer = undefined;
        this.pump();
      }, wait);
      return;
    }
    this.dirty = false;
    this.lastStart = this.opts.clock.now();
    this.inFlight = this.opts.publish().then(
      () => {
        this.failures = 0;
      },
      () => {
        this.failures++;
        this.dirty = true;
      },
    );
    void this.inFlight.finally(() => {
      this.inFlight = undefined;
      this.pump();
    });
  }
}
