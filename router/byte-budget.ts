import { ModelmuxError } from '../common/errors.js';

/**
 * The bound on bytes the router holds in memory across all requests at once: request bodies
 * while they are read and tried (a retry resends them), and the part of an answer written to a
 * client that reads slowly (ADR 0026). A request that would go past it is refused with 503
 * `buffer_full`, a slow reader's answer stops being read from its replica.
 */
export class ByteBudget {
  private held = 0;

  /** `limit`: bytes, at least 1. */
  constructor(readonly limit: number) {}

  get used(): number {
    return this.held;
  }

  get available(): number {
    return Math.max(0, this.limit - this.held);
  }

  /** At or past the limit. */
  get full(): boolean {
    return this.held >= this.limit;
  }

  /** Takes `n` bytes if they fit under the limit; false (and nothing taken) if not. */
  take(n: number): boolean {
    if (this.held + n > this.limit) return false;
    this.held += n;
    return true;
  }

  /**
   * Counts `n` bytes already in hand, past the limit if need be: an answer's chunk read from its
   * replica is written to its client either way, and the caller stops reading at `full`.
   */
  add(n: number): void {
    this.held += n;
  }

  release(n: number): void {
    this.held = Math.max(0, this.held - n);
  }

  /** The refusal of what does not fit: 503 `buffer_full`, the same words on every path. */
  fullError(): ModelmuxError {
    return new ModelmuxError('buffer_full', `the router holds ${this.limit} bytes of requests and answers, its limit`);
  }
}
