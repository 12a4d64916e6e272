import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Every metric of the operator, declared once on an explicit registry. */
export interface OperatorMetrics {
  registry: Registry;
  /**
   * controller: multiplexeddeployment | modelroute. result: success | requeue | error (retried
   * with backoff) | terminal (needs a spec edit).
   */
  reconciles: Counter<'controller' | 'result'>;
  reconcileDuration: Histogram<'controller'>;
  /** Keys waiting in each controller's work queue. */
  queueDepth: Gauge<'controller'>;
  /** 1 while this process holds the leader Lease. */
  leader: Gauge;
  /** Informers started again after they stopped on an error (the API server away, a list refused). */
  watchRestarts: Counter<'resource'>;
  /**
   * Requests to the Kubernetes API. caller: reconcile | informer | leader_election; verb: get,
   * list, watch, create, update, patch, apply, delete, discovery. Reconciles read the informers'
   * caches, so their get and list stay at zero.
   */
  apiRequests: Counter<'caller' | 'verb'>;
}

export function createOperatorMetrics(): OperatorMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'modelmux_operator_' });
  return {
    registry,
    reconciles: new Counter({ name: 'modelmux_operator_reconciles_total', help: 'Reconciles by controller and result.', labelNames: ['controller', 'result'], registers: [registry] }),
    reconcileDuration: new Histogram({
      name: 'modelmux_operator_reconcile_duration_seconds',
      help: 'Time spent in one reconcile, by controller.',
      labelNames: ['controller'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    queueDepth: new Gauge({ name: 'modelmux_operator_queue_depth', help: 'Keys waiting in each controller’s work queue.', labelNames: ['controller'], registers: [registry] }),
    leader: new Gauge({ name: 'modelmux_operator_leader', help: '1 while this instance is the leader.', registers: [registry] }),
    watchRestarts: new Counter({
      name: 'modelmux_operator_watch_restarts_total',
      help: 'Informers started again after they stopped on an error.',
      labelNames: ['resource'],
      registers: [registry],
    }),
    apiRequests: new Counter({
      name: 'modelmux_operator_api_requests_total',
      help: 'Requests to the Kubernetes API by caller (reconcile, informer, leader_election) and verb.',
      labelNames: ['caller', 'verb'],
      registers: [registry],
    }),
  };
}
