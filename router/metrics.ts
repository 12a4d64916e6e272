import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { PlacementKind } from './placement.js';

/**
 * The router's metrics, declared once. Labels are bounded: the route (one per
 * MultiplexedDeployment), status class, placement kind, retry reason; never the model id.
 */
export class RouterMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: 'modelmux_router_requests_total', help: 'Requests answered, by route and status class.', labelNames: ['route', 'code'] as const, registers: [this.registry] });
  readonly requestDuration = new Histogram({
    name: 'modelmux_router_request_duration_seconds',
    help: 'Time from request to the end of the response, waiting included.',
    labelNames: ['route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly upstreamLatency = new Histogram({
    name: 'modelmux_router_upstream_latency_seconds',
    help: 'Time from sending to a replica to its response headers, per try.',
    labelNames: ['route'] as const,
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly placements = new Counter({ name: 'modelmux_router_placements_total', help: 'Placement decisions by kind.', labelNames: ['route', 'kind'] as const, registers: [this.registry] });
  readonly placementWait = new Histogram({
    name: 'modelmux_router_placement_wait_seconds',
    help: 'Time a request waited in the router for a replica slot.',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({ name: 'modelmux_router_queue_depth', help: 'Requests waiting for a replica slot.', labelNames: ['route'] as const, registers: [this.registry] });
  readonly retries = new Counter({ name: 'modelmux_router_retries_total', help: 'Requests retried on another replica, by reason.', labelNames: ['route', 'reason'] as const, registers: [this.registry] });
  readonly replicas = new Gauge({ name: 'modelmux_router_replicas', help: 'Ready replicas known per route.', labelNames: ['route'] as const, registers: [this.registry] });

  placed(route: string, kind: PlacementKind, waitedMs: number): void {
    this.placements.inc({ route, kind });
    this.placementWait.observe({ route }, waitedMs / 1000);
  }
}

export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}
