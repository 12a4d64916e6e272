import { BoundCounter, BoundHistogram } from '../../common/bound-metrics.js';
import { oncePer } from '../../common/once-per.js';
import type { RouterMetrics } from '../metrics.js';

/**
 * How a routed request (or its mirror copy) ended: the values of the `outcome` label. ok: an
 * answer below 400; client_error: 4xx (a backend model missing from the store is
 * model_not_found, 404); error: 5xx or no answer; dropped (mirrors only): not sent, because
 * --mirror-max-in-flight copies were already under way.
 */
export type RouteOutcome = 'ok' | 'client_error' | 'error' | 'dropped';

export function routeOutcome(status: number): RouteOutcome {
  return status < 400 ? 'ok' : status < 500 ? 'client_error' : 'error';
}

/**
 * The metrics of split routes, on the router's registry. Labels are bounded by the ModelRoute
 * objects, not by requests: `route` is a route's public name, `backend` a model its spec names
 * (at most 16 per route, and its mirror).
 */
export class ModelRouteMetrics {
  private readonly requests: BoundCounter;
  private readonly mirrors: BoundCounter;
  private readonly mirrorDuration: BoundHistogram;

  private constructor(metrics: RouterMetrics) {
    this.requests = new BoundCounter(
      'modelmux_router_route_requests_total',
      'Requests for a split route’s public name, by the backend model that served them and how they ended.',
      ['route', 'backend', 'outcome'],
      metrics.registry,
    );
    this.mirrors = new BoundCounter(
      'modelmux_router_route_mirror_requests_total',
      'Copies of split-route requests sent to the route’s mirror (answers discarded), by how they ended; dropped: over --mirror-max-in-flight.',
      ['route', 'backend', 'outcome'],
      metrics.registry,
    );
    this.mirrorDuration = new BoundHistogram(
      'modelmux_router_route_mirror_duration_seconds',
      'Time from sending a mirror copy to the end of its (discarded) answer.',
      ['route', 'backend'],
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      metrics.registry,
    );
  }

  /** The one instance registered on `metrics`' registry. */
  static readonly for = oncePer((metrics: RouterMetrics) => new ModelRouteMetrics(metrics));

  /** A request for `route` answered by `backend` with `status`. */
  answered(route: string, backend: string, status: number): void {
    this.requests.labels({ route, backend, outcome: routeOutcome(status) }).inc();
  }

  mirrorEnded(route: string, backend: string, outcome: RouteOutcome, seconds?: number): void {
    this.mirrors.labels({ route, backend, outcome }).inc();
    if (seconds !== undefined) this.mirrorDuration.labels({ route, backend }).observe(seconds);
  }
}
