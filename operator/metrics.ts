import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Every metric of the operator, declared once on an explicit registry. */
export interface OperatorMetrics {
  registry: Registry;
  /** result: success | requeue | error (retried with backoff) | terminal (needs a spec edit). */
  reconciles: Counter<'result'>;
  reconcileDuration: Histogram;
  queueDepth: Gauge;
  /** 1 while this process holds the leader Lease. */
  leader: Gauge;
  /** Watches re-established after an error or a 410 Gone. */
  watchRestarts: Counter<'resource'>;
}

export function createOperatorMetrics(): OperatorMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'modelmux_operator_' });
  return {
    registry,
    reconciles: new Counter({ name: 'modelmux_operator_reconciles_total', help: 'Reconciles by result.', labelNames: ['result'], registers: [registry] }),
    reconcileDuration: new Histogram({
      name: 'modelmux_operator_reconcile_duration_seconds',
      help: 'Time spent in one reconcile.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    queueDepth: new Gauge({ name: 'modelmux_operator_queue_depth', help: 'Keys waiting in the work queue.', registers: [registry] }),
    leader: new Gauge({ name: 'modelmux_operator_leader', help: '1 while this instance is the leader.', registers: [registry] }),
    watchRestarts: new Counter({
      name: 'modelmux_operator_watch_restarts_total',
      help: 'Watches resumed or relisted after they ended with an error.',
      labelNames: ['resource'],
      registers: [registry],
    }),
  };
}
