import { TIER_LISTED_MAX } from '../../common/model-table.js';
import type { Clock, Random } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import { SlotSet } from '../../common/slot-set.js';
import { DecayedCounts } from './decayed-counts.js';
import { LatencyWindows } from './latency-window.js';
import { DEFAULT_OUTLIER_POLICY, maxEjected, OutlierState, type OutlierPolicy, type TryOutcome } from './outlier-detection.js';
import { decide, type PlacementKind, type PlacementPolicy, type ReplicaLoad } from './placement.js';
import { RetryBudget } from './retry-budget.js';
import { MIN_SAMPLES } from '../exchange/try-timeout.js';

/**
 * One route's load balancer: what this router knows about each replica (in-flight, model
 * tables, recent sends, what responses reported, outlier state) and the bounded wait queue
 * around the pure `decide`; also the route's retry budget and recent latencies (ADR 0030). No
 * sockets: timers are injected, so a test or the simulator steps through time.
 */

/** Schedules `fn` after `ms`; returns a cancel function. */
export type SetTimer = (ms: number, fn: () => void) => () => void;

export const systemSetTimer: SetTimer = (ms, fn) => {
  const t = setTimeout(fn, ms);
  t.unref();
  return () => clearTimeout(t);
};

/** How long a send counts as holding the model: a few table publications, a few seconds. */
export const DEFAULT_RECENT_MS = 5000;

export interface BalancerOptions extends PlacementPolicy {
  /** Ray's matching timeout t: a request whose holders are all full waits a draw in [t, 2t]. */
  matchTimeoutMs: number;
  /** How long a send (or a response saying the replica has the model) counts as holding it. */
  recentMs: number;
  /**
   * How old a table may be when it arrives (publication interval plus watch or poll delay).
   * A table that omits a model this router sent there longer ago than this means the replica
   * has since evicted it, so the memory of that send is dropped rather than kept for recentMs:
   * sending there again would reload it and evict another model.
   */
  tableLagMs: number;
  /** Requests allowed to wait; past it, `pool_saturated`. */
  maxQueue: number;
  /**
   * How long a request to a route with no replica at all (scaled to zero) is held for one to
   * appear, and how many are held at once; 0 answers `no_replicas` at once (docs/autoscaling.md).
   */
  zeroHoldMs?: number | undefined;
  zeroHoldMax?: number | undefined;
  /** When replicas are ejected (outlier-detection.ts); DEFAULT_OUTLIER_POLICY when unset. */
  outliers?: OutlierPolicy | undefined;
  /** Retries per 100 requests of the route (retry-budget.ts); DEFAULT_RETRY_BUDGET_PERCENT when unset. */
  retryBudgetPercent?: number | undefined;
}

export const DEFAULT_RETRY_BUDGET_PERCENT = 20;

/** A try in flight that has no response headers yet: told when its replica is marked down. */
export interface TryWatcher {
  /** The replica left the route (discovery) or was ejected (outlier detection). */
  replicaDown(): void;
  /** The balancer's own: the replica the try is watched at, and its place among the watched tries. */
  watchedAt: string | undefined;
  watchSlot: number;
}

/** The set of a table without a tier list, shared by every replica. */
const NO_MODELS: ReadonlySet<string> = new Set();

/** A table's tier list as a set, at most TIER_LISTED_MAX of its ids. */
function tierSet(ids: readonly string[] | undefined): ReadonlySet<string> {
  return ids === undefined || ids.length === 0 ? NO_MODELS : new Set(ids.slice(0, TIER_LISTED_MAX));
}

/** Latencies are judged over the last one to two windows of this length. */
const LATENCY_WINDOW_MS = 30_000;
/** Models whose latency is tracked on their own; others are judged by the route's. */
const LATENCY_MODELS = 1024;

/** The part of a ModelTable (common/model-table.ts) placement reads. */
export interface TableView {
  version: number;
  /** Most recently used first, as the replica's LRU lists them: the last is the next to go. */
  loaded: readonly string[];
  loading: readonly string[];
  /** Model slots (maxModelsPerReplica). */
  capacity: number;
  /** Models not loaded whose bytes the replica keeps in host memory, or on disk (ADR 0047); absent from older replicas. */
  host?: readonly string[] | undefined;
  disk?: readonly string[] | undefined;
}

export interface Lease {
  replica: string;
  model: string | undefined;
  kind: PlacementKind;
  waitedMs: number;
  /**
   * The replica has the model loaded, as its table or a response of its own said (or the
   * request names no model): the try should take about what the model's tries take lately,
   * not a load.
   */
  warm: boolean;
}

export type AcquireResult = { ok: true; lease: Lease } | { ok: false; error: ModelmuxError };

interface ReplicaState {
  name: string;
  inFlight: number;
  /** In-flight by model: the per-model load that decides when a model is hot. */
  byModel: Map<string, number>;
  table: Set<string>;
  /** The table's models still loading: a try of one waits for the load. */
  loading: ReadonlySet<string>;
  tableVersion: number;
  /** Model slots from the table; 0 until a table says. */
  capacity: number;
  /** Models sent there (still in `recent`) that the last table did not list: slots they take. */
  unlisted: Set<string>;
  /** The table's loaded models, most recently used first: the last ones go first. */
  lru: readonly string[];
  /** The table's models in host memory and on disk: a miss placed there loads faster. */
  host: ReadonlySet<string>;
  disk: ReadonlySet<string>;
  /** Model → time until which this replica counts as holding it without the table saying so. */
  recent: Map<string, number>;
  /** Model → until when a response from the replica itself said it has it. */
  confirmed: Map<string, number>;
  /**
   * Model → the replica's table version in the response that said it has the model. A table
   * at least that new that does not list the model means it was evicted since, whatever the
   * clock says; an older one says nothing about it.
   */
  seenAtVersion: Map<string, number>;
  /** Failed tries take a replica out of rotation for a while (outlier ejection). */
  outlier: OutlierState;
  /** When a try there last got response headers: the replica was alive then. */
  answeredAt: number;
  /** What `decide` sees of this replica, rewritten by each `place`. */
  view: ReplicaLoad;
}

interface Waiter {
  model: string | undefined;
  exclude: ReadonlySet<string>;
  since: number;
  timedOut: boolean;
  /** Waiting for the route's first replica (scale from zero), not for a slot. */
  held: boolean;
  cancelTimer: () => void;
  done: (r: AcquireResult) => void;
}

/** The cancel function of a request that no longer waits, and the timer of one that never times out. */
const NOTHING = (): void => undefined;

const NO_REPLICAS = (): ModelmuxError => new ModelmuxError('no_replicas', 'the route has no ready replica');

/** A first try excludes no replica: shared, so a request does not build an empty set. */
export const NO_EXCLUDE: ReadonlySet<string> = new Set();

/** Recent-send entries kept per replica before expired ones are swept. */
const RECENT_SWEEP_AT = 4096;

/**
 * Half-life of the counts behind a model's share of requests and a replica's share of sends:
 * long enough that a burst of a lukewarm model does not look like lasting traffic, short
 * enough to follow a shift of popularity within a minute.
 */
const SHARE_HALF_LIFE_MS = 10_000;

export class Balancer {
  private readonly replicas = new Map<string, ReplicaState>();
  /** Tries in flight without response headers yet, each at the replica it names (`watchedAt`). */
  private readonly watching = new SlotSet<'watchSlot', TryWatcher>('watchSlot');
  private readonly waiters: Waiter[] = [];
  /** Requests per model: a model's share of traffic. */
  private readonly demand = new DecayedCounts(SHARE_HALF_LIFE_MS);
  /** Sends per replica: which replicas carry more than their part of this router's traffic. */
  private readonly traffic = new DecayedCounts(SHARE_HALF_LIFE_MS);
  private options: BalancerOptions;
  private readonly retries: RetryBudget;
  private readonly latency = new LatencyWindows(LATENCY_WINDOW_MS, LATENCY_MODELS);

  constructor(
    options: BalancerOptions,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly setTimer: SetTimer,
  ) {
    this.options = options;
    this.retries = new RetryBudget(options.retryBudgetPercent ?? DEFAULT_RETRY_BUDGET_PERCENT);
  }

  /** Applies new limits (a changed MultiplexedDeployment spec); waiting requests re-run. */
  configure(options: BalancerOptions): void {
    this.options = options;
    this.retries.configure(options.retryBudgetPercent ?? DEFAULT_RETRY_BUDGET_PERCENT);
    this.drain();
  }

  get queueDepth(): number {
    return this.waiters.length;
  }

  /** Requests held for a replica of a route that has none: the demand that should scale it from zero. */
  get heldCount(): number {
    if (this.replicas.size > 0) return 0;
    let n = 0;
    for (const w of this.waiters) if (w.held) n++;
    return n;
  }

  replicaNames(): string[] {
    return [...this.replicas.keys()];
  }

  inFlight(name: string): number {
    return this.replicas.get(name)?.inFlight ?? 0;
  }

  /**
   * Replaces the replica set; in-flight counts and memory of kept replicas survive. The tries
   * still waiting at a replica that left are told, once the new set is in place.
   */
  setReplicas(names: readonly string[]): void {
    const keep = new Set(names);
    for (const name of this.replicas.keys()) if (!keep.has(name)) this.replicas.delete(name);
    const orphans = this.watching.values().filter((w) => w.watchedAt !== undefined && !keep.has(w.watchedAt));
    for (const w of orphans) {
      this.watching.delete(w);
      w.watchedAt = undefined;
    }
    for (const name of names) {
      if (!this.replicas.has(name)) {
        this.replicas.set(name, {
          name,
          inFlight: 0,
          byModel: new Map(),
          table: new Set(),
          loading: new Set(),
          tableVersion: -1,
          capacity: 0,
          unlisted: new Set(),
          lru: [],
          host: NO_MODELS,
          disk: NO_MODELS,
          recent: new Map(),
          confirmed: new Map(),
          seenAtVersion: new Map(),
          outlier: new OutlierState(),
          answeredAt: Number.NEGATIVE_INFINITY,
          view: { name, inFlight: 0, modelInFlight: 0, holds: false, pending: false, freeSlots: 0, capacity: 0, victimShare: 0, traffic: 0, tier: 'store' },
        });
      }
    }
    this.drain();
    for (const w of orphans) w.replicaDown();
  }

  /** A replica's published table; an older version than the one held is ignored. */
  setTable(name: string, table: TableView | undefined): void {
    const r = this.replicas.get(name);
    if (!r || table === undefined) return;
    // A restarted replica starts its versions again from zero: a lower version with an empty
    // past is a new process, so accept a version drop when the table is smaller than ours.
    if (table.version < r.tableVersion && table.loaded.length + table.loading.length >= r.table.size) return;
    r.tableVersion = table.version;
    r.table = new Set([...table.loaded, ...table.loading]);
    r.loading = new Set(table.loading);
    r.capacity = table.capacity;
    r.lru = table.loaded;
    r.host = tierSet(table.host);
    r.disk = tierSet(table.disk);
    const now = this.clock.now();
    const seenBefore = now - this.options.tableLagMs;
    r.unlisted.clear();
    for (const [m, until] of r.recent) {
      if (r.table.has(m) || until <= now) continue;
      const seenAt = r.seenAtVersion.get(m);
      if (seenAt !== undefined && table.version >= seenAt) this.forget(r, m);
      else if (until - this.options.recentMs < seenBefore) r.recent.delete(m);
      else r.unlisted.add(m);
    }
    this.drain();
  }

  /**
   * A response from `name` said it has `model` (x-modelmux-cache hit or miss), at its table
   * version `tableVersion` (x-modelmux-table-version) when the response carried one.
   */
  observe(name: string, model: string, tableVersion?: number): void {
    const r = this.replicas.get(name);
    if (!r) return;
    this.remember(r, model);
    r.confirmed.set(model, this.clock.now() + this.options.recentMs);
    if (tableVersion !== undefined) r.seenAtVersion.set(model, tableVersion);
    if (r.confirmed.size >= RECENT_SWEEP_AT) {
      this.sweep(r.confirmed);
      for (const m of r.seenAtVersion.keys()) if (!r.confirmed.has(m)) r.seenAtVersion.delete(m);
    }
  }

  private forget(r: ReplicaState, model: string): void {
    r.recent.delete(model);
    r.confirmed.delete(model);
    r.seenAtVersion.delete(model);
    r.unlisted.delete(model);
  }

  /** `w` waits for response headers from `lease.replica` until `unwatch`. */
  watch(lease: Lease, w: TryWatcher): void {
    if (!this.replicas.has(lease.replica)) return;
    w.watchedAt = lease.replica;
    this.watching.add(w);
  }

  unwatch(lease: Lease, w: TryWatcher): void {
    if (w.watchedAt !== lease.replica) return;
    this.watching.delete(w);
    w.watchedAt = undefined;
  }

  /**
   * A try at `replica` ended as `outcome`; `latencyMs`, for an answer from a replica that had
   * the model loaded, is its time to response headers (what the adaptive try timeout learns
   * from). Returns how long the replica is now ejected for, 0 when this did not eject it; the
   * tries still waiting there are told.
   */
  reportTry(replica: string, model: string | undefined, outcome: TryOutcome, latencyMs?: number): number {
    const now = this.clock.now();
    if (latencyMs !== undefined) this.latency.record(model, latencyMs, now);
    const r = this.replicas.get(replica);
    if (!r) return 0;
    if (outcome === 'answered') r.answeredAt = now;
    const policy = this.options.outliers ?? DEFAULT_OUTLIER_POLICY;
    const mayEject = this.ejectedCount(now) < maxEjected(this.replicas.size, policy.maxEjectedPercent);
    const ms = r.outlier.record(outcome, now, policy, mayEject);
    if (ms === 0) return 0;
    this.setTimer(ms, () => this.drain());
    this.watching.forEach((w) => {
      if (w.watchedAt === replica) w.replicaDown();
    });
    return ms;
  }

  /** Whether `replica` answered some try at or after `since`: it is alive, whatever a try of its waits for. */
  answeredSince(replica: string, since: number): boolean {
    return (this.replicas.get(replica)?.answeredAt ?? Number.NEGATIVE_INFINITY) >= since;
  }

  /** The recent p99 (ms) of warm tries of `model`, or of the route; undefined when too few are known. */
  recentP99(model: string | undefined): number | undefined {
    return this.latency.p99(model, this.clock.now(), MIN_SAMPLES);
  }

  /** A request's first try: it adds to what the route's retries may spend. */
  requested(): void {
    this.retries.requested(this.clock.now());
  }

  /**
   * Whether a request that was sent to `replica` and those in `exclude` may try once more: some
   * other replica is in placement, and the route's retry budget has a retry left, which this takes.
   */
  takeRetry(replica: string, exclude: ReadonlySet<string>): 'taken' | 'no_other_replica' | 'budget_spent' {
    const now = this.clock.now();
    for (const r of this.replicas.values()) {
      if (r.name !== replica && this.isLive(r, exclude, now)) return this.retries.tryRetry(now) ? 'taken' : 'budget_spent';
    }
    return 'no_other_replica';
  }

  private ejectedCount(now: number): number {
    let n = 0;
    for (const r of this.replicas.values()) if (r.outlier.isEjected(now)) n++;
    return n;
  }

  /**
   * Places a request; `done` runs once, synchronously when a replica is free now, else when
   * one frees up. Returns a cancel function for a request that gives up (client gone, deadline).
   */
  acquire(model: string | undefined, done: (r: AcquireResult) => void, exclude: ReadonlySet<string> = NO_EXCLUDE): () => void {
    const now = this.clock.now();
    if (this.replicas.size === 0 && exclude.size === 0) return this.hold(model, done, now);
    if (!this.anyLive(exclude, now)) {
      done({ ok: false, error: NO_REPLICAS() });
      return NOTHING;
    }
    // A retry on another replica (exclude set) is the same request: count it once.
    if (model !== undefined && exclude.size === 0) this.demand.add(model, now);
    const w: Waiter = { model, exclude, since: now, timedOut: false, held: false, cancelTimer: NOTHING, done };
    const lease = this.place(w);
    if (lease) {
      done({ ok: true, lease });
      return NOTHING;
    }
    if (this.waiters.length >= this.options.maxQueue) {
      done({ ok: false, error: new ModelmuxError('pool_saturated', `${this.waiters.length} requests are already waiting for a replica`) });
      return NOTHING;
    }
    if (model !== undefined) {
      const t = this.options.matchTimeoutMs;
      w.cancelTimer = this.setTimer(t + this.random() * t, () => {
        w.timedOut = true;
        this.drain();
      });
    }
    return this.enqueue(w);
  }

  /**
   * A first try at a route with no replica (scaled to zero, or not yet up): held up to
   * zeroHoldMs, placed like any request once a replica comes, else `no_replicas`. Held requests
   * count towards maxQueue too, and past zeroHoldMax are refused at once.
   */
  private hold(model: string | undefined, done: (r: AcquireResult) => void, now: number): () => void {
    const ms = this.options.zeroHoldMs ?? 0;
    if (ms <= 0 || this.heldCount >= (this.options.zeroHoldMax ?? 0) || this.waiters.length >= this.options.maxQueue) {
      done({ ok: false, error: NO_REPLICAS() });
      return NOTHING;
    }
    if (model !== undefined) this.demand.add(model, now);
    const w: Waiter = { model, exclude: NO_EXCLUDE, since: now, timedOut: false, held: true, cancelTimer: NOTHING, done };
    w.cancelTimer = this.setTimer(ms, () => {
      const i = this.waiters.indexOf(w);
      if (i === -1) return;
      if (this.replicas.size === 0) {
        this.waiters.splice(i, 1);
        w.done({ ok: false, error: new ModelmuxError('no_replicas', `no replica became ready within ${ms} ms`) });
        return;
      }
      // A replica came but is full: from here the request waits like one past its matching timeout.
      w.timedOut = true;
      this.drain();
    });
    return this.enqueue(w);
  }

  private enqueue(w: Waiter): () => void {
    this.waiters.push(w);
    return () => {
      const i = this.waiters.indexOf(w);
      if (i !== -1) {
        this.waiters.splice(i, 1);
        w.cancelTimer();
      }
    };
  }

  /** The request holding `lease` finished: its slot frees and waiting requests re-run. */
  release(lease: Lease): void {
    const r = this.replicas.get(lease.replica);
    if (r && r.inFlight > 0) {
      r.inFlight--;
      if (lease.model !== undefined) {
        const n = (r.byModel.get(lease.model) ?? 1) - 1;
        if (n > 0) r.byModel.set(lease.model, n);
        else r.byModel.delete(lease.model);
      }
    }
    this.drain();
  }

  private isLive(r: ReplicaState, exclude: ReadonlySet<string>, now: number): boolean {
    return !r.outlier.isEjected(now) && !exclude.has(r.name);
  }

  private anyLive(exclude: ReadonlySet<string>, now: number): boolean {
    for (const r of this.replicas.values()) if (this.isLive(r, exclude, now)) return true;
    return false;
  }

  private holds(r: ReplicaState, model: string, now: number): boolean {
    if (r.table.has(model)) return true;
    const until = r.recent.get(model);
    return until !== undefined && until > now;
  }

  /** Whether `r` has `model` loaded, not loading, as its table or its own response said. */
  private warm(r: ReplicaState, model: string, now: number): boolean {
    if (r.table.has(model)) return !r.loading.has(model);
    const until = r.confirmed.get(model);
    return until !== undefined && until > now;
  }

  /** Whether `model` on `r` is known only from this router's own send, not yet from the replica. */
  private pending(r: ReplicaState, model: string, now: number): boolean {
    if (r.table.has(model)) return false;
    const until = r.confirmed.get(model);
    return until === undefined || until <= now;
  }

  private remember(r: ReplicaState, model: string): void {
    if (r.recent.size >= RECENT_SWEEP_AT) this.sweep(r.recent);
    r.recent.set(model, this.clock.now() + this.options.recentMs);
    if (!r.table.has(model)) r.unlisted.add(model);
  }

  private sweep(entries: Map<string, number>): void {
    const now = this.clock.now();
    for (const [m, until] of entries) if (until <= now) entries.delete(m);
  }

  /**
   * The share of the model a new one would evict on `r`: the table's least recently used,
   * skipping one for each model this router sent there since that did not fit.
   */
  private victimShare(r: ReplicaState, now: number): number {
    const evicted = r.table.size + r.unlisted.size - r.capacity;
    const victim = evicted < 0 ? undefined : r.lru[r.lru.length - 1 - evicted];
    return victim === undefined ? 0 : this.demand.share(victim, now);
  }

  /** Takes a slot for `w` if `decide` finds one. */
  private place(w: Waiter): Lease | undefined {
    const now = this.clock.now();
    const m = w.model;
    const view: ReplicaLoad[] = [];
    for (const r of this.replicas.values()) {
      if (!this.isLive(r, w.exclude, now)) continue;
      // Each replica's view is one object, rewritten for every decision: `decide` keeps none.
      const v = r.view;
      v.inFlight = r.inFlight;
      v.modelInFlight = m === undefined ? 0 : (r.byModel.get(m) ?? 0);
      v.holds = m !== undefined && this.holds(r, m, now);
      v.pending = m !== undefined && this.pending(r, m, now);
      v.freeSlots = r.capacity - r.table.size - r.unlisted.size;
      v.capacity = r.capacity;
      v.victimShare = this.victimShare(r, now);
      v.traffic = this.traffic.count(r.name, now);
      v.tier = m === undefined ? 'store' : r.host.has(m) ? 'host' : r.disk.has(m) ? 'disk' : 'store';
      view.push(v);
    }
    const share = m === undefined ? 0 : this.demand.share(m, now);
    const d = decide({ model: m, share, timedOut: w.timedOut }, view, this.options, this.random);
    if (d.kind === 'wait') return undefined;
    const r = this.replicas.get(d.replica);
    if (!r) return undefined;
    r.inFlight++;
    this.traffic.add(r.name, now);
    if (m !== undefined) {
      r.byModel.set(m, (r.byModel.get(m) ?? 0) + 1);
      this.remember(r, m);
    }
    const warm = m === undefined || (d.kind === 'holder' && this.warm(r, m, now));
    return { replica: r.name, model: m, kind: d.kind, waitedMs: now - w.since, warm };
  }

  private draining = false;
  private drainAgain = false;
  /** Models whose waiters a pass of `drain` was told to wait for since its last placement. */
  private readonly waitingModels = new Set<string>();
  private readonly waitingPastTimeout = new Set<string>();

  /** A placement changed what the next decisions read: every model is decided again. */
  private forgetWaits(): void {
    this.waitingModels.clear();
    this.waitingPastTimeout.clear();
  }

  /** Whether some replica has a slot below maxOngoingRequests: `decide` places only there. */
  private anySlotFree(): boolean {
    for (const r of this.replicas.values()) if (r.inFlight < this.options.maxOngoingRequests) return true;
    return false;
  }

  /**
   * Re-runs waiting requests in arrival order; those that still cannot go stay queued. A
   * callback may release a slot synchronously (the simulator does): that re-entry only marks
   * another pass, so a waiter is never handed two leases.
   *
   * A pass decides only where a decision may differ from the last one: it ends once every
   * replica is full, and it skips a waiter whose model's waiter was told to wait since the
   * pass's last placement (nothing it reads has changed). Deciding every waiter on every
   * release cost a queue of 1,000 milliseconds of CPU per answer: a burst that filled the
   * queue kept the router too busy to empty it (a cold start at 1,000 calls/s on one gRPC
   * connection had a third refused pool_saturated).
   */
  private drain(): void {
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = true;
    try {
      do {
        this.drainAgain = false;
        this.forgetWaits();
        let slotFree = this.anySlotFree();
        for (let i = 0; i < this.waiters.length;) {
          const w = this.waiters[i];
          if (w === undefined) break;
          let result: AcquireResult | undefined;
          if (this.replicas.size === 0) {
            if (w.held) {
              i++;
              continue;
            }
            result = { ok: false, error: NO_REPLICAS() };
          } else {
            if (!slotFree) break;
            // A retry's exclusions make its decision its own.
            const m = w.exclude.size === 0 ? w.model : undefined;
            const told = w.timedOut ? this.waitingPastTimeout : this.waitingModels;
            if (m !== undefined && told.has(m)) {
              i++;
              continue;
            }
            const lease = this.place(w);
            if (lease) {
              result = { ok: true, lease };
              this.forgetWaits();
              slotFree = this.anySlotFree();
            } else if (m !== undefined) told.add(m);
          }
          if (result === undefined) {
            i++;
            continue;
          }
          this.waiters.splice(i, 1);
          w.cancelTimer();
          w.done(result);
        }
      } while (this.drainAgain);
    } finally {
      this.draining = false;
    }
  }
}
