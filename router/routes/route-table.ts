import type { Clock, Random } from '../../common/clock.js';
import type { Logger } from '../../common/log.js';
import type { ModelRoute } from '../../common/model-route.js';
import { RouteIndex } from '../../common/route-index.js';
import { Balancer, type SetTimer } from '../placement/balancer.js';
import type { RouteState } from '../discovery/discovery.js';
import type { OutlierPolicy } from '../placement/outlier-detection.js';
import { ModelRouting } from './model-routing.js';
import { defaultPlacementPolicy } from '../placement/placement.js';
import { UpstreamPool } from '../exchange/upstream-pool.js';

/** Knobs of every route's balancer that do not come from the resource. */
export interface RouteDefaults {
  recentMs: number;
  /** See BalancerOptions.tableLagMs. */
  tableLagMs: number;
  maxQueue: number;
  /** Scale from zero: how long and how many requests a route with no replica holds (BalancerOptions). */
  zeroHoldMs?: number | undefined;
  zeroHoldMax?: number | undefined;
  /** Keep-alive connections per replica. */
  connectionsPerReplica: number;
  /** Outlier detection and the retry budget of every route (ADR 0030); the balancer's defaults when unset. */
  outliers?: OutlierPolicy | undefined;
  retryBudgetPercent?: number | undefined;
}

export interface Route {
  prefix: string;
  /** The pool's key in ModelRoutes' deploymentRef (RouteState.pool). */
  pool: string;
  balancer: Balancer;
  /** The ModelRoutes naming this pool: public name → route. */
  models: ModelRouting;
  /** Replica name → its connection pool. */
  pools: Map<string, UpstreamPool>;
}

/**
 * Route prefix → balancer and keep-alive pools, kept in step with discovery snapshots. A
 * replica that leaves has its pool closed after its in-flight requests end (UpstreamPool.close waits).
 */
export class RouteTable {
  private readonly routes = new Map<string, Route>();
  /** ModelRoutes by pool key, as the last route source update gave them. */
  private modelRoutes = new Map<string, ModelRoute[]>();

  constructor(
    private readonly defaults: RouteDefaults,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly setTimer: SetTimer,
    private readonly log: Logger,
  ) {}

  match(prefix: string): Route | undefined {
    return this.routes.get(prefix);
  }

  all(): Route[] {
    return [...this.routes.values()];
  }

  apply(states: readonly RouteState[]): void {
    const seen = new Set<string>();
    for (const s of states) {
      seen.add(s.prefix);
      // A send must count as holding until a table published after it can have arrived.
      const tableLagMs = s.tableLagMs ?? this.defaults.tableLagMs;
      const recentMs = Math.max(this.defaults.recentMs, 2 * tableLagMs);
      const { maxQueue, zeroHoldMs, zeroHoldMax, outliers, retryBudgetPercent } = this.defaults;
      const options = { ...defaultPlacementPolicy(s.maxOngoingRequests), matchTimeoutMs: s.matchTimeoutMs, recentMs, tableLagMs, maxQueue, zeroHoldMs, zeroHoldMax, outliers, retryBudgetPercent };
      let route = this.routes.get(s.prefix);
      const pool = s.pool ?? s.prefix.slice(1);
      if (!route) {
        route = { prefix: s.prefix, pool, balancer: new Balancer(options, this.clock, this.random, this.setTimer), models: this.routingOf(pool), pools: new Map() };
        this.routes.set(s.prefix, route);
        this.log.info('route added', { route: s.prefix });
      } else {
        route.balancer.configure(options);
        if (route.pool !== pool) {
          route.pool = pool;
          route.models = this.routingOf(pool);
        }
      }
      const names = new Set(s.replicas.map((r) => r.name));
      for (const [name, pool] of route.pools) {
        if (!names.has(name)) {
          route.pools.delete(name);
          void pool.close().catch(() => undefined);
        }
      }
      for (const r of s.replicas) {
        if (!route.pools.has(r.name)) route.pools.set(r.name, new UpstreamPool(r.url, { connections: this.defaults.connectionsPerReplica, keepAliveTimeoutMs: 10_000 }));
      }
      route.balancer.setReplicas([...names]);
      for (const r of s.replicas) route.balancer.setTable(r.name, r.table);
    }
    for (const [prefix, route] of this.routes) {
      if (seen.has(prefix)) continue;
      route.balancer.setReplicas([]);
      for (const pool of route.pools.values()) void pool.close().catch(() => undefined);
      this.routes.delete(prefix);
      this.log.info('route removed', { route: prefix });
    }
  }

  /**
   * The ModelRoutes by pool key (a whole new set from the route source). Each prefix's index is
   * rebuilt at once: a request sees either the old routes or the new, never a mix.
   */
  applyModelRoutes(byPool: ReadonlyMap<string, readonly ModelRoute[]>): void {
    const before = this.modelRoutes;
    this.modelRoutes = new Map([...byPool].map(([pool, routes]) => [pool, [...routes]]));
    // A pool whose routes are the same objects as before keeps its index: one route changed
    // among thousands rebuilds its own pool's only.
    for (const route of this.routes.values()) if (!sameRoutes(before.get(route.pool), this.modelRoutes.get(route.pool))) route.models = this.routingOf(route.pool);
    this.log.info('model routes applied', { pools: this.modelRoutes.size, routes: [...this.modelRoutes.values()].reduce((n, r) => n + r.length, 0) });
  }

  private routingOf(pool: string): ModelRouting {
    const routes = this.modelRoutes.get(pool);
    return routes === undefined || routes.length === 0 ? ModelRouting.empty(this.random) : new ModelRouting(RouteIndex.build(routes), this.random);
  }

  async close(): Promise<void> {
    const pools = this.all().flatMap((r) => [...r.pools.values()]);
    await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
  }
}

function sameRoutes(a: readonly ModelRoute[] | undefined, b: readonly ModelRoute[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.length === b.length && a.every((r, i) => r === b[i]);
}
