import { ModelmuxError } from '../../common/errors.js';

/**
 * The member requests of one client's composite request (an ensemble or a sequence, and the
 * composite routes it names, at every level), pure: at most `maxRequests` of them in all, and at
 * most `maxInFlight` under way at once, in the order they were asked for; the rest wait for one
 * to end. A member that turns out to be a composite itself gives its place back at once (it
 * holds no replica slot, and its own members wait for places here): so the places are held only
 * by requests at replicas, and nesting can never hold them all while waiting for more.
 */
export class MemberSlots {
  private sent = 0;
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private draining = false;

  /** `maxRequests`, `maxInFlight`: at least 1. */
  constructor(
    readonly maxRequests: number,
    readonly maxInFlight: number,
  ) {}

  /** Member requests under way (given a place and not ended). */
  get inFlight(): number {
    return this.running;
  }

  /** Member requests waiting for a place. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * One more member request: `start` runs now if a place is free, else once one is; it is given
   * the function that ends the request (a member that is a composite calls it at once), and must
   * not throw. The returned function is the same: it ends the request, or drops it while it
   * waits; calls after the first do nothing. Throws 502 `composite_member_limit` when this would
   * be member request `maxRequests + 1`.
   */
  add(start: (end: () => void) => void): () => void {
    if (this.sent >= this.maxRequests) {
      throw new ModelmuxError(
        'composite_member_limit',
        `the request needs more than ${this.maxRequests} member requests (the ensembles and sequences it passes through, at every level), the most the router sends for one request (--composite-max-member-requests)`,
      );
    }
    this.sent++;
    let state: 'waiting' | 'running' | 'ended' = 'waiting';
    const end = (): void => {
      if (state === 'ended') return;
      if (state === 'waiting') this.waiting.splice(this.waiting.indexOf(run), 1);
      else this.running--;
      state = 'ended';
      this.drain();
    };
    const run = (): void => {
      state = 'running';
      start(end);
    };
    this.waiting.push(run);
    this.drain();
    return end;
  }

  /** Starts waiting members while places are free; a start that ends at once is seen by the loop, not by a nested drain. */
  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.running < this.maxInFlight && this.waiting.length > 0) {
        this.running++;
        (this.waiting.shift() as () => void)();
      }
    } finally {
      this.draining = false;
    }
  }
}
