import { ModelmuxError } from './errors.js';

/**
 * The bound on bytes a process holds in memory across all requests at once. The router's: request
 * bodies and gRPC messages while they are read and tried (a retry resends them), and the part of
 * an answer written to a client that reads slowly, over HTTP and gRPC alike (ADR 0026, ADR 0039).
 * The replica's: gRPC messages while they arrive and answers its clients have not taken. A request
 * that would go past it is refused with 503 `buffer_full` (gRPC: RESOURCE_EXHAUSTED), a slow
 * reader's answer stops being read from its replica.
 */
export class ByteBudget {
  private held = 0;

  /** `limit`: bytes, at least 1; `holder` names the process in the refusal. */
  constructor(
    readonly limit: number,
    private readonly holder: 'router' | 'replica' = 'router',
  ) {}

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
    return new ModelmuxError('buffer_full', `the ${this.holder} holds ${this.limit} bytes of requests and answers, its limit`);
  }
}
