import { NO_EXCLUDE, type AcquireResult, type Lease, type TryWatcher } from '../placement/balancer.js';
import type { Expiring } from './deadlines.js';
import type { RetryReason, RouteMetrics } from '../metrics.js';
import type { RouterContext } from './context.js';
import type { Route } from '../routes/route-table.js';
import { adaptiveTryTimeoutMs } from './try-timeout.js';

/**
 * - body: reading the request body (HTTP only: buffered up to the limit, timed by the body timeouts).
 * - waiting: asked the balancer for a slot, not placed yet.
 * - upstream: a try is in flight, no answer sent to the client yet.
 * - responding: the replica's response is streaming to the client (HTTP only).
 * - done: answered (or given up); late upstream callbacks only give the slot back.
 */
export type ExchangePhase = 'body' | 'waiting' | 'upstream' | 'responding' | 'done';

/**
 * What an HTTP exchange (exchange.ts) and a gRPC one (grpc-exchange.ts) share of a request's
 * tries: placement by the route's balancer, the adaptive try timeout and its cap, outlier
 * reports, the retry limit and budget, and the slot given back when a try ends (ADR 0030).
 * A base class rather than an object the exchanges hold: the plain HTTP path allocates nothing
 * more per request for it (ADR 0014). Subclasses say how a try is sent, given up and answered.
 */
export abstract class TryAttempts implements Expiring, TryWatcher {
  protected readonly started: number;
  protected route: Route | undefined;
  protected routeMetrics: RouteMetrics | undefined;
  /** The model the balancer places by (a ModelRoute's backend once resolved). */
  protected model: string | undefined;
  /** Covers waiting, the tries and the answer. */
  protected requestDeadline = Number.POSITIVE_INFINITY;
  /** What the shared `Deadlines` sweep checks (ADR 0014); each exchange says what it covers. */
  deadlineAt = Number.POSITIVE_INFINITY;
  deadlineSlot = -1;
  watchedAt: string | undefined = undefined;
  watchSlot = -1;
  protected cancelWait: (() => void) | undefined;
  protected lease: Lease | undefined;
  protected exclude: ReadonlySet<string> = NO_EXCLUDE;
  protected tries = 0;
  protected tryStart = 0;
  /** When the try in flight is given up for another replica if it may be (the adaptive try timeout)… */
  protected tryDeadline = Number.POSITIVE_INFINITY;
  /** …and when it fails for good (--try-timeout-ms). */
  protected tryCapAt = Number.POSITIVE_INFINITY;
  /** The adaptive try timeout is earlier than the cap and has not fired yet. */
  protected adaptivePending = false;
  /** The try is being given up for this reason, its retry already granted: its end retries. */
  protected abandoning: RetryReason | undefined;
  protected replica: string | undefined;
  protected placement: string | undefined;
  protected waitedMs: number | undefined;

  constructor(
    protected readonly router: RouterContext,
    protected phase: ExchangePhase,
  ) {
    this.started = router.clock.now();
  }

  abstract expire(): void;

  /** The balancer says the replica of the try in flight was marked down (TryWatcher). */
  abstract replicaDown(): void;

  /** Sends the try to the lease's replica (after `beginTry`). */
  protected abstract dispatch(lease: Lease): void;

  /** Answers with the error (or cuts an answer under way), stops any wait or try. */
  protected abstract fail(err: unknown): void;

  /** The last guard of a callback the balancer runs: nothing may escape into its queue. */
  protected abstract guard(err: unknown): void;

  /** Gives up the try in flight; its end retries (`abandoning`). */
  protected abstract abandon(reason: RetryReason): void;

  /** The try is over (answered, failed or aborted): forgets it and calls `releaseLease`. */
  protected abstract endTry(): void;

  protected place(): void {
    this.phase = 'waiting';
    const cancel = (this.route as Route).balancer.acquire(this.model, this.onPlaced, this.exclude);
    // `onPlaced` may already have run (a free replica): only a request still waiting keeps it.
    if (this.phase === 'waiting') this.cancelWait = cancel;
  }

  private readonly onPlaced = (r: AcquireResult): void => {
    this.cancelWait = undefined;
    if (!r.ok) return this.fail(r.error);
    const lease = r.lease;
    if (this.phase !== 'waiting') {
      (this.route as Route).balancer.release(lease);
      return;
    }
    // Also runs inside another request's release (the balancer's queue): nothing may escape.
    try {
      this.dispatch(lease);
    } catch (err) {
      this.guard(err);
    }
  };

  /** `fail`'s first step: the request is done, and no longer waits for a slot. Returns the phase it was in. */
  protected markDone(): ExchangePhase {
    const was = this.phase;
    this.phase = 'done';
    if (was === 'waiting' && this.cancelWait !== undefined) {
      this.cancelWait();
      this.cancelWait = undefined;
    }
    return was;
  }

  /** A try takes its lease: counted, and the request counted once at its first try. */
  protected beginTry(lease: Lease): void {
    this.lease = lease;
    if (this.tries === 0) (this.route as Route).balancer.requested();
    this.tries++;
    this.replica = lease.replica;
    this.placement = lease.kind;
    this.waitedMs = Math.round(lease.waitedMs);
    (this.routeMetrics as RouteMetrics).placed(lease.kind, lease.waitedMs);
  }

  /** Starts the try's clocks: its adaptive timeout, its cap, and the sweep's next deadline. */
  protected timeTry(lease: Lease): void {
    const now = this.router.clock.now();
    const policy = this.router.tryTimeouts;
    // A try that loads its model takes what the load takes: only a warm one is judged by latency.
    const timeout = lease.warm ? adaptiveTryTimeoutMs((this.route as Route).balancer.recentP99(lease.model), policy) : policy.capMs;
    (this.routeMetrics as RouteMetrics).tryTimeoutSet(timeout);
    this.tryStart = now;
    this.tryDeadline = now + timeout;
    this.tryCapAt = now + policy.capMs;
    this.adaptivePending = timeout < policy.capMs;
    this.deadlineAt = Math.min(this.requestDeadline, this.tryDeadline);
  }

  /** The try's slot goes back to the balancer, which stops watching it. */
  protected releaseLease(): void {
    const lease = this.lease;
    if (lease === undefined) return;
    this.lease = undefined;
    const balancer = (this.route as Route).balancer;
    balancer.unwatch(lease, this);
    balancer.release(lease);
  }

  /**
   * Whether the request may try another replica: within its own retries, with another replica
   * in placement, and within the route's retry budget, which this takes a retry from.
   */
  protected mayRetry(): boolean {
    if (this.tries > this.router.limits.maxRetries) return false;
    const taken = (this.route as Route).balancer.takeRetry(this.replica as string, this.exclude);
    if (taken === 'budget_spent') (this.routeMetrics as RouteMetrics).retryRefused();
    return taken === 'taken';
  }

  /** Tells outlier detection that the try at the current replica failed; an ejection is counted and logged. */
  protected report(outcome: 'refused' | 'failed'): void {
    const replica = this.replica as string;
    const ms = (this.route as Route).balancer.reportTry(replica, this.model, outcome);
    if (ms === 0) return;
    (this.routeMetrics as RouteMetrics).ejected(outcome);
    this.router.log.warn('replica ejected', { route: (this.route as Route).prefix, replica, outcome, ejectedMs: ms });
  }

  /** Sends the request to another replica; the retry was granted by `mayRetry`. */
  protected retry(reason: RetryReason): void {
    const replica = this.replica as string;
    this.abandoning = undefined;
    this.adaptivePending = false;
    this.deadlineAt = this.requestDeadline;
    // A try given up by its deadline was taken out of the sweep: the request deadline goes on.
    this.router.deadlines.add(this);
    (this.routeMetrics as RouteMetrics).retried(reason);
    this.exclude = new Set([...this.exclude, replica]);
    this.endTry();
    this.place();
  }

  /**
   * The try outlived its adaptive timeout. A replica that has answered other tries since this one
   * began is alive: the request is the slow one, and another replica would only spend as long on
   * it, or be stalled by it as this one may be (ADR 0039); it waits on up to the cap, which a try
   * always had. Otherwise the replica counts a failure, and the request goes elsewhere if it may.
   */
  protected tryTimedOut(): void {
    this.adaptivePending = false;
    const lease = this.lease as Lease;
    const balancer = (this.route as Route).balancer;
    balancer.unwatch(lease, this);
    const alive = balancer.answeredSince(lease.replica, this.tryStart);
    if (alive) (this.routeMetrics as RouteMetrics).slowTryKept();
    else {
      this.report('failed');
      if (this.mayRetry()) return this.abandon('timeout');
    }
    balancer.watch(lease, this);
    this.deadlineAt = Math.min(this.requestDeadline, this.tryCapAt);
    this.router.deadlines.add(this);
  }
}
