/**
 * A per-client budget of HTTP/2 streams the client itself resets before their answer (the
 * "rapid reset" of CVE-2023-44487): opening a call and cancelling it at once costs the client one
 * frame each and the server a stream, a decode and, past the router, a replica's work. Over a
 * window of `windowMs`, a client that has reset more than `maxResets` unanswered calls, and more
 * than half of all it made, is over budget: its connections are closed and new ones refused for
 * a window. The share spares a busy client whose short deadlines expire under load; the count
 * spares a client that cancels now and then. Pure; the clock is injected.
 */
export interface ResetPolicy {
  /** Resets within a window before a client is judged; 0: no budget. */
  maxResets: number;
  windowMs: number;
}

interface ClientWindow {
  start: number;
  calls: number;
  resets: number;
  blockedUntil: number;
}

export class ResetBudget {
  private readonly clients = new Map<string, ClientWindow>();

  constructor(
    readonly policy: ResetPolicy,
    private readonly now: () => number,
  ) {}

  private window(client: string): ClientWindow {
    const t = this.now();
    const w = this.clients.get(client);
    if (w !== undefined && t - w.start < this.policy.windowMs) return w;
    const fresh = { start: t, calls: 0, resets: 0, blockedUntil: w?.blockedUntil ?? 0 };
    this.clients.set(client, fresh);
    return fresh;
  }

  /** A call of `client` opened. */
  called(client: string): void {
    if (this.policy.maxResets > 0) this.window(client).calls++;
  }

  /** `client` reset one of its calls before its answer; true when that puts it over budget (it is then blocked for a window), once. */
  reset(client: string): boolean {
    if (this.policy.maxResets === 0) return false;
    const w = this.window(client);
    w.resets++;
    if (w.blockedUntil > this.now() || w.resets <= this.policy.maxResets || w.resets * 2 <= w.calls) return false;
    w.blockedUntil = this.now() + this.policy.windowMs;
    return true;
  }

  /** Whether `client`'s connections are refused (over budget lately). */
  blocked(client: string): boolean {
    const w = this.clients.get(client);
    return w !== undefined && w.blockedUntil > this.now();
  }

  /** `client` has no connection left: its window is dropped, unless it is blocked. */
  forget(client: string): void {
    if (!this.blocked(client)) this.clients.delete(client);
  }

  get size(): number {
    return this.clients.size;
  }
}
