import type { ByteBudget } from '../../common/byte-budget.js';

/**
 * What the router holds of one answer for a client that reads it more slowly than its replica
 * writes it (ADR 0026). While the client keeps up, nothing is counted. From the first write the
 * client's connection did not take at once, every further byte the replica sends is written on
 * (the connection queues it) and counted, against `maxBytes` for this answer and the router's
 * `ByteBudget` for all of them, so the replica finishes and its slot is freed. Past either bound
 * the replica's connection should pause: the exchange then gives the client a short window to
 * drain before it ends the exchange.
 */
export class ResponseBacklog {
  private held = 0;
  private behind = false;

  constructor(
    private readonly budget: ByteBudget,
    private readonly maxBytes: number,
  ) {}

  /** The client has not yet taken everything written to it. */
  get isBehind(): boolean {
    return this.behind;
  }

  /** Bytes counted while the client is behind. */
  get bytes(): number {
    return this.held;
  }

  /**
   * `n` bytes were written to the client; `accepted` is what the write returned (false: the
   * connection's queue is over its mark). True when the replica's connection should pause.
   */
  wrote(n: number, accepted: boolean): boolean {
    if (this.behind) {
      this.budget.add(n);
      this.held += n;
    } else if (!accepted) this.behind = true;
    return this.behind && (this.held >= this.maxBytes || this.budget.full);
  }

  /** The client took everything (its connection drained) or went away: nothing is held any more. */
  drained(): void {
    this.budget.release(this.held);
    this.held = 0;
    this.behind = false;
  }
}
