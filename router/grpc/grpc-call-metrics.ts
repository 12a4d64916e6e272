import type { CounterChild, HistogramChild } from '../../common/bound-metrics.js';
import { oncePer } from '../../common/once-per.js';
import type { RouterMetrics } from '../metrics.js';

/** One route's and method's series: its duration histogram and its counters by status code name. */
interface MethodSeries {
  duration: HistogramChild;
  byCode: Map<string, CounterChild>;
}

/**
 * The gRPC call metrics' children, kept per route, method and code: `labels()` per call built
 * label objects and a key string for each of the two metrics (it showed in the router's
 * allocation profile, ADR 0055). Bounded as the metrics' labels are: routes, four methods,
 * gRPC's status codes.
 */
export class GrpcCallMetrics {
  private readonly routes = new Map<string, Map<string, MethodSeries>>();

  private constructor(private readonly metrics: RouterMetrics) {}

  /** The one instance of `metrics`. */
  static readonly for = oncePer((metrics: RouterMetrics) => new GrpcCallMetrics(metrics));

  /** A call of `method` on `route` answered with status `code` after `seconds`. */
  answered(route: string, method: string, code: string, seconds: number): void {
    let methods = this.routes.get(route);
    if (methods === undefined) {
      methods = new Map();
      this.routes.set(route, methods);
    }
    let s = methods.get(method);
    if (s === undefined) {
      s = { duration: this.metrics.grpcRequestDuration.labels({ route, method }), byCode: new Map() };
      methods.set(method, s);
    }
    let counter = s.byCode.get(code);
    if (counter === undefined) {
      counter = this.metrics.grpcRequests.labels({ route, method, code });
      s.byCode.set(code, counter);
    }
    counter.inc();
    s.duration.observe(seconds);
  }
}
