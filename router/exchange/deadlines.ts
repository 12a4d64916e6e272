import type { Clock } from '../../common/clock.js';
import type { SetTimer } from '../placement/balancer.js';
import { SlotSet } from '../../common/slot-set.js';

/** Something with a deadline: `expire` runs once, at most `resolutionMs` after `deadlineAt`. */
export interface Expiring {
  readonly deadlineAt: number;
  expire(): void;
  /** The sweep's own: the request's place among the pending ones. */
  deadlineSlot: number;
}

/**
 * The deadlines of in-flight requests, checked by one sweep every `resolutionMs` while any is
 * pending, instead of one Node timer (or AbortSignal.timeout) per request: adding and removing
 * is O(1) (a SlotSet, not a Set: common/slot-set.ts), and a sweep visits only requests in
 * flight. A deadline fires up to `resolutionMs` late, which the router keeps small next to the
 * request timeout.
 */
export class Deadlines {
  private readonly pending = new SlotSet<'deadlineSlot', Expiring>('deadlineSlot');
  private scheduled = false;

  constructor(
    private readonly clock: Clock,
    private readonly setTimer: SetTimer,
    private readonly resolutionMs: number,
  ) {}

  get size(): number {
    return this.pending.size;
  }

  add(e: Expiring): void {
    this.pending.add(e);
    if (!this.scheduled) {
      this.scheduled = true;
      this.setTimer(this.resolutionMs, this.sweep);
    }
  }

  remove(e: Expiring): void {
    this.pending.delete(e);
  }

  private readonly sweep = (): void => {
    this.scheduled = false;
    const now = this.clock.now();
    this.pending.forEach((e) => {
      if (e.deadlineAt > now) return;
      this.pending.delete(e);
      e.expire();
    });
    if (this.pending.size > 0 && !this.scheduled) {
      this.scheduled = true;
      this.setTimer(this.resolutionMs, this.sweep);
    }
  };
}

/** The sweep interval for a request timeout: a twentieth of it, at most 100 ms. */
export function deadlineResolutionMs(requestTimeoutMs: number): number {
  return Math.max(1, Math.min(100, Math.floor(requestTimeoutMs / 20)));
}
