import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { BoundCounter, BoundHistogram, type CounterChild, type HistogramChild } from '../common/bound-metrics.js';
import type { PlacementKind } from './placement/placement.js';

/**
 * The router's metrics, declared once. Labels are bounded: the route (one per
 * MultiplexedDeployment), status class, placement kind, retry reason; never the model id.
 */
export class RouterMetrics {
  readonly registry = new Registry();
  // Per-request metrics count without prom-client's per-call label hashing (common/bound-metrics.ts).
  readonly requests = new BoundCounter('modelmux_router_requests_total', 'Requests answered, by route and status class.', ['route', 'code'], this.registry);
  readonly requestDuration = this.byRouteHistogram(
    'modelmux_router_request_duration_seconds',
    'Time from request to the end of the response, waiting included.',
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  );
  readonly upstreamLatency = this.byRouteHistogram(
    'modelmux_router_upstream_latency_seconds',
    'Time from sending to a replica to its response headers, per try.',
    [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  );
  readonly grpcRequests = new BoundCounter(
    'modelmux_router_grpc_requests_total',
    'gRPC calls answered on the gRPC port, by route, method (ModelInfer, ModelMetadata…) and gRPC status code name (OK, UNAVAILABLE…).',
    ['route', 'method', 'code'],
    this.registry,
  );
  readonly grpcRequestDuration = new BoundHistogram(
    'modelmux_router_grpc_request_duration_seconds',
    "Time from a gRPC call's message to its answer, waiting included, by route and method.",
    ['route', 'method'],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    this.registry,
  );
  readonly placements = new BoundCounter('modelmux_router_placements_total', 'Placement decisions by kind.', ['route', 'kind'], this.registry);
  readonly placementWait = this.byRouteHistogram('modelmux_router_placement_wait_seconds', 'Time a request waited in the router for a replica slot.', [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4]);
  readonly queueDepth = new Gauge({ name: 'modelmux_router_queue_depth', help: 'Requests waiting for a replica slot.', labelNames: ['route'] as const, registers: [this.registry] });
  readonly heldRequests = new Gauge({
    name: 'modelmux_router_held_requests',
    help: 'Requests held for a route that has no replica (scaled to zero): the demand an autoscaler should bring it from zero for.',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });
  readonly retries = new BoundCounter('modelmux_router_retries_total', 'Requests retried on another replica, by reason.', ['route', 'reason'], this.registry);
  readonly retriesRefused = new BoundCounter(
    'modelmux_router_retries_refused_total',
    "Tries that could have been retried on another replica but were not, because the route's retry budget was spent.",
    ['route'],
    this.registry,
  );
  readonly slowTriesKept = new BoundCounter(
    'modelmux_router_slow_tries_kept_total',
    'Tries past their adaptive timeout kept at their replica, which had answered other tries meanwhile: the request was the slow one (ADR 0039).',
    ['route'],
    this.registry,
  );
  readonly bodiesTakenBack = new BoundCounter(
    'modelmux_router_bodies_taken_back_total',
    "Requests whose body, cut through to a replica, was not whole within --body-cut-through-hold-ms: the try was cut, freeing the replica's slot, and the body read whole before the request was placed again.",
    ['route'],
    this.registry,
  );
  readonly ejections = new BoundCounter(
    'modelmux_router_outlier_ejections_total',
    'Replicas taken out of placement by outlier detection, by the outcome that ejected them.',
    ['route', 'outcome'],
    this.registry,
  );
  readonly tryTimeout = this.byRouteHistogram('modelmux_router_try_timeout_seconds', 'The adaptive timeout each try was given, up to --try-timeout-ms.', [0.25, 0.5, 1, 2, 5, 10, 30, 60]);
  readonly replicas = new Gauge({ name: 'modelmux_router_replicas', help: 'Ready replicas known per route.', labelNames: ['route'] as const, registers: [this.registry] });
  readonly timeouts = new BoundCounter('modelmux_router_timeouts_total', 'Requests and connections ended by a timeout, by phase.', ['phase'], this.registry);
  readonly rejectedConnections = new BoundCounter(
    'modelmux_router_rejected_connections_total',
    'Connections answered with an error and closed at a limit: connections, client_connections (per address), buffered_bytes; resets: gRPC connections of a client over its reset budget, closed.',
    ['reason'],
    this.registry,
  );
  readonly clientConnections = new Gauge({ name: 'modelmux_router_client_connections', help: 'Client connections open.', registers: [this.registry] });
  readonly bufferedBytes = new Gauge({ name: 'modelmux_router_buffered_bytes', help: "Request body and slow readers' answer bytes the router holds.", registers: [this.registry] });
  private readonly timeoutsByPhase = new Map(TIMEOUT_PHASES.map((phase) => [phase, this.timeouts.labels({ phase })]));
  private readonly rejectedByReason = new Map(REJECT_REASONS.map((reason) => [reason, this.rejectedConnections.labels({ reason })]));

  private readonly byRoute = new Map<string, RouteMetrics>();

  constructor() {
    // Node's process metrics, as the operator's and the replica's: CPU, memory, heap spaces,
    // event-loop lag and collection pauses (`modelmux_router_nodejs_gc_duration_seconds`).
    collectDefaultMetrics({ register: this.registry, prefix: 'modelmux_router_' });
  }

  private byRouteHistogram(name: string, help: string, buckets: number[]): BoundHistogram {
    return new BoundHistogram(name, help, ['route'], buckets, this.registry);
  }

  timedOut(phase: TimeoutPhase): void {
    this.timeoutsByPhase.get(phase)?.inc();
  }

  rejected(reason: RejectReason): void {
    this.rejectedByReason.get(reason)?.inc();
  }

  placed(route: string, kind: PlacementKind, waitedMs: number): void {
    this.forRoute(route).placed(kind, waitedMs);
  }

  /**
   * One route's label children, resolved once and kept: the per-request path then skips even
   * the lookup by label values. Routes are few (one per MultiplexedDeployment), so the cache
   * stays small.
   */
  forRoute(route: string): RouteMetrics {
    let m = this.byRoute.get(route);
    if (m === undefined) {
      m = new RouteMetrics(this, route);
      this.byRoute.set(route, m);
    }
    return m;
  }
}

/** The metrics of one route with their label values bound. */
export class RouteMetrics {
  private readonly requestsByClass: CounterChild[];
  private readonly duration: HistogramChild;
  private readonly upstream: HistogramChild;
  private readonly wait: HistogramChild;
  private readonly placementsByKind = new Map<PlacementKind, CounterChild>();
  private readonly retriesByReason = new Map<RetryReason, CounterChild>();
  private readonly refused: CounterChild;
  private readonly tryTimeouts: HistogramChild;

  constructor(
    private readonly metrics: RouterMetrics,
    private readonly route: string,
  ) {
    this.requestsByClass = STATUS_CLASSES.map((code) => metrics.requests.labels({ route, code }));
    this.duration = metrics.requestDuration.labels({ route });
    this.upstream = metrics.upstreamLatency.labels({ route });
    this.wait = metrics.placementWait.labels({ route });
    this.refused = metrics.retriesRefused.labels({ route });
    this.tryTimeouts = metrics.tryTimeout.labels({ route });
  }

  /** A request answered with `status` after `seconds`, waiting included. */
  answered(status: number, seconds: number): void {
    (this.requestsByClass[Math.floor(status / 100)] ?? this.metrics.requests.labels({ route: this.route, code: statusClass(status) })).inc();
    this.duration.observe(seconds);
  }

  upstreamLatency(seconds: number): void {
    this.upstream.observe(seconds);
  }

  placed(kind: PlacementKind, waitedMs: number): void {
    let c = this.placementsByKind.get(kind);
    if (c === undefined) {
      c = this.metrics.placements.labels({ route: this.route, kind });
      this.placementsByKind.set(kind, c);
    }
    c.inc();
    this.wait.observe(waitedMs / 1000);
  }

  retried(reason: RetryReason): void {
    let c = this.retriesByReason.get(reason);
    if (c === undefined) {
      c = this.metrics.retries.labels({ route: this.route, reason });
      this.retriesByReason.set(reason, c);
    }
    c.inc();
  }

  /** The route's retry budget refused a retry. */
  retryRefused(): void {
    this.refused.inc();
  }

  /** A try past its adaptive timeout stayed at its replica, alive (rare: no cached child). */
  slowTryKept(): void {
    this.metrics.slowTriesKept.labels({ route: this.route }).inc();
  }

  /** A body cut through was taken back from its replica (rare: no cached child). */
  bodyTakenBack(): void {
    this.metrics.bodiesTakenBack.labels({ route: this.route }).inc();
  }

  /** Outlier detection ejected a replica after a try that ended as `outcome` (rare: no cached child). */
  ejected(outcome: 'refused' | 'failed'): void {
    this.metrics.ejections.labels({ route: this.route, outcome }).inc();
  }

  /** A try was given `ms` to answer. */
  tryTimeoutSet(ms: number): void {
    this.tryTimeouts.observe(ms / 1000);
  }
}

/**
 * Which timeout ended a request or a connection: the values of the timeouts metric's `phase`
 * label. head, body_idle, body_total: the client's request (408 `request_timeout`); request:
 * the whole-request deadline after the body; upstream: one try's response headers (both 504
 * `timeout`); slow_reader: a client that did not take its answer, holding the replica
 * (ADR 0026); downstream_write: a client that stopped reading; keep_alive: an idle connection.
 */
export type TimeoutPhase = 'head' | 'body_idle' | 'body_total' | 'request' | 'upstream' | 'slow_reader' | 'downstream_write' | 'keep_alive';
export const TIMEOUT_PHASES: readonly TimeoutPhase[] = ['head', 'body_idle', 'body_total', 'request', 'upstream', 'slow_reader', 'downstream_write', 'keep_alive'];

/** Why a connection was refused: the values of the rejected-connections metric's `reason` label. */
export type RejectReason = 'connections' | 'client_connections' | 'buffered_bytes' | 'resets';
export const REJECT_REASONS: readonly RejectReason[] = ['connections', 'client_connections', 'buffered_bytes', 'resets'];

/**
 * Why a request went to another replica: the values of the retries metric's `reason` label.
 * connect_error: the connection failed or broke before an answer; overloaded: the replica
 * refused it at once (503 overloaded or shutting_down); gateway_error: a 502 or 504 from
 * something between router and replica; timeout: no response headers within the adaptive try
 * timeout; replica_down: the replica left the route or was ejected while the try waited.
 */
export type RetryReason = 'connect_error' | 'overloaded' | 'gateway_error' | 'timeout' | 'replica_down';

export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}

/** Index = status / 100. */
const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];
