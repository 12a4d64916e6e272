import { ModelmuxError } from '../../common/errors.js';

export interface CompositeClientLimits {
  /** Composite requests (ensembles, sequences) under way at once, all clients together. */
  maxInFlight: number;
  /** Of those, from one client address. */
  maxInFlightPerClient: number;
  /** Bytes one client address's composite requests may hold at once: bodies, member bodies, member answers. */
  maxBytesPerClient: number;
}

/** Every bound of ensemble and sequence requests: the router's `--composite-*` flags (router/config.ts). */
export interface CompositeLimits extends CompositeClientLimits {
  /** Largest body of a composite request: each member is sent it, and the router parses it. */
  maxBodyBytes: number;
  /** Member requests one client request may cause, at every level of composites it passes through. */
  maxMemberRequests: number;
  /** Of those, under way at once (the replica slots one client request may hold). */
  maxMembersInFlight: number;
  /** Worker threads that do their tensor work; 0: the event loop does it. */
  workers: number;
}

/** The defaults of the `--composite-*` flags; ADR 0041 says how they were chosen. */
export const DEFAULT_COMPOSITE_LIMITS: CompositeLimits = {
  maxBodyBytes: 4 * 1024 * 1024,
  maxMemberRequests: 64,
  maxMembersInFlight: 4,
  workers: 1,
  maxInFlight: 64,
  maxInFlightPerClient: 8,
  maxBytesPerClient: 64 * 1024 * 1024,
};

interface ClientUse {
  requests: number;
  bytes: number;
}

/**
 * Which composite requests the router takes, pure: at most `maxInFlight` at once, at most
 * `maxInFlightPerClient` of them from one address, and the bytes each address's composites hold
 * at most `maxBytesPerClient`, so that one client's ensembles cannot take the router's whole byte
 * budget (`--max-buffered-bytes`) or all its composite work. A composite's own member requests
 * are part of it, not new composite requests: they are admitted once, with it.
 */
export class CompositeAdmission {
  private readonly clients = new Map<string, ClientUse>();
  private total = 0;

  constructor(readonly limits: CompositeClientLimits) {}

  /** Composite requests under way. */
  get inFlight(): number {
    return this.total;
  }

  /** Bytes the composites of `client` hold now. */
  bytesOf(client: string): number {
    return this.clients.get(client)?.bytes ?? 0;
  }

  /**
   * A composite request from `client` (its address), or the refusal: 503 `composite_saturated`
   * when the router has its most under way, 429 `composite_client_limit` when the client has.
   * The ticket must be ended once, when the request is.
   */
  admit(client: string): CompositeTicket | ModelmuxError {
    const { maxInFlight, maxInFlightPerClient } = this.limits;
    if (this.total >= maxInFlight) return new ModelmuxError('composite_saturated', `the router has ${maxInFlight} ensemble and sequence requests under way, its limit (--composite-max-in-flight)`);
    const use = this.clients.get(client) ?? { requests: 0, bytes: 0 };
    if (use.requests >= maxInFlightPerClient) {
      return new ModelmuxError(
        'composite_client_limit',
        `this address has ${maxInFlightPerClient} ensemble and sequence requests under way at the router, its limit (--composite-max-in-flight-per-client)`,
      );
    }
    use.requests++;
    this.total++;
    this.clients.set(client, use);
    return new CompositeTicket(this.limits.maxBytesPerClient, use, () => {
      this.total--;
      use.requests--;
      if (use.requests === 0) this.clients.delete(client);
    });
  }
}

/** One admitted composite request: its client's share of bytes, taken and given back through it. */
export class CompositeTicket {
  private held = 0;
  private ended = false;

  constructor(
    private readonly limit: number,
    /** What its client's composites use, this one included. */
    private readonly use: ClientUse,
    private readonly onEnd: () => void,
  ) {}

  /** Bytes this request holds. */
  get bytes(): number {
    return this.held;
  }

  /**
   * Counts `n` more bytes held for this request, or refuses them (nothing counted): 429
   * `composite_client_limit` when its client's composites would hold more than their share.
   */
  take(n: number): ModelmuxError | undefined {
    if (this.use.bytes + n > this.limit) {
      return new ModelmuxError(
        'composite_client_limit',
        `this address's ensemble and sequence requests would hold ${this.use.bytes + n} bytes of bodies and answers, more than its share of ${this.limit} (--composite-max-bytes-per-client)`,
      );
    }
    this.use.bytes += n;
    this.held += n;
    return undefined;
  }

  release(n: number): void {
    const m = Math.min(n, this.held);
    this.held -= m;
    this.use.bytes -= m;
  }

  /** The request is over: what it still holds is given back. A second call does nothing. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.release(this.held);
    this.onEnd();
  }
}
