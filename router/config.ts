import { z } from 'zod';
import { booleanString, byteQuantityString, parseConfig, type OptionSpecs, intString } from '../common/config.js';
import { logOptionSpecs, logOptionsShape } from '../common/log-options.js';
import { DEFAULT_BODY_IDLE_TIMEOUT_MS, DEFAULT_BODY_TIMEOUT_MS, DEFAULT_MAX_BODY_BYTES, DEFAULT_WRITE_TIMEOUT_MS } from '../common/request-limits.js';
import { DEFAULT_RECENT_MS, DEFAULT_RETRY_BUDGET_PERCENT } from './placement/balancer.js';
import { DEFAULT_ADMIN_PORT } from './http1/admin-server.js';
import { DEFAULT_GRPC_MAX_RESETS, DEFAULT_GRPC_PORT, RESET_WINDOW_MS } from './grpc/grpc-options.js';
import { DEFAULT_COMPOSITE_LIMITS } from './composite/composite-admission.js';
import { DEFAULT_OUTLIER_POLICY } from './placement/outlier-detection.js';
import { MIN_PER_SECOND, WINDOW_MS } from './placement/retry-budget.js';
import { DEFAULT_MIRROR_MAX_IN_FLIGHT } from './routes/route-split.js';
import { DEFAULT_CUT_THROUGH_HOLD_MS } from './exchange/context.js';
import { parseStaticRoutes, type StaticRoute } from './discovery/static-discovery.js';

const positiveInt = z.coerce.number().int().positive();
const positiveBytes = byteQuantityString.pipe(z.number().int().positive());

export const routerConfigSchema = z.object({
  discovery: z.enum(['static', 'kube']).default('static'),
  host: z.string().min(1).default('0.0.0.0'),
  port: intString(0, 65535).default(8000),
  /** -1: no admin port; 0: any free one. */
  adminPort: intString(-1, 65535).default(DEFAULT_ADMIN_PORT),
  /** Default: --host. */
  adminHost: z.string().min(1).optional(),
  repositoryApiToken: z
    .string()
    .min(16, 'a token of at least 16 characters')
    .max(256, 'a token of at most 256 characters')
    .regex(/^[A-Za-z0-9._~+/-]+=*$/, 'a bearer token: letters, digits and -._~+/ (RFC 6750), optionally ending in =')
    .optional(),
  /** -1: no gRPC port (as the replica's); 0: any free one. */
  grpcPort: intString(-1, 65535).default(DEFAULT_GRPC_PORT),
  grpcMaxResponseBytes: positiveBytes.default(64 * 1024 * 1024),
  grpcMaxConcurrentStreams: positiveInt.default(256),
  grpcMaxConnectionAgeMs: intString(0, 2_147_483_647).default(0),
  grpcMaxResetsPerClient: intString(0, 1_000_000).default(DEFAULT_GRPC_MAX_RESETS),
  grpcUpstream: z.enum(['http2', 'http1']).default('http1'),
  grpcFraming: z.enum(['own', 'nghttp2']).default('own'),
  routes: z
    .string()
    .superRefine((v, ctx) => {
      for (const p of parseStaticRoutes(v).problems) ctx.addIssue({ code: 'custom', message: p });
    })
    .optional(),
  routesFile: z.string().min(1).optional(),
  mirrorMaxInFlight: intString(0, 100_000).default(DEFAULT_MIRROR_MAX_IN_FLIGHT),
  maxOngoingRequests: positiveInt.default(16),
  matchTimeoutSeconds: z.coerce.number().min(0).max(60).default(1),
  pollIntervalMs: positiveInt.default(500),
  namespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
    .max(63)
    .optional(),
  maxBodyBytes: byteQuantityString.default(DEFAULT_MAX_BODY_BYTES),
  requestTimeoutMs: positiveInt.default(60_000),
  tryTimeoutMs: positiveInt.default(30_000),
  tryTimeoutFloorMs: positiveInt.default(1000),
  tryTimeoutMultiple: z.coerce.number().min(1).max(1000).default(5),
  maxRetries: intString(0, 5).default(2),
  retryBudgetPercent: z.coerce.number().min(0).max(100).default(DEFAULT_RETRY_BUDGET_PERCENT),
  outlierConsecutiveFailures: intString(1, 1000).default(DEFAULT_OUTLIER_POLICY.consecutiveFailures),
  outlierEjectionMs: positiveInt.default(DEFAULT_OUTLIER_POLICY.ejectionMs),
  outlierMaxEjectionMs: positiveInt.default(DEFAULT_OUTLIER_POLICY.maxEjectionMs),
  outlierMaxEjectedPercent: z.coerce.number().min(0).max(100).default(DEFAULT_OUTLIER_POLICY.maxEjectedPercent),
  maxQueue: positiveInt.default(1024),
  zeroHoldMs: intString(0, 600_000).default(30_000),
  zeroHoldMax: intString(0, 100_000).default(256),
  recentMs: positiveInt.default(DEFAULT_RECENT_MS),
  connectionsPerReplica: positiveInt.default(64),
  shutdownGraceMs: positiveInt.default(25_000),
  fastPath: booleanString.default(true),
  bodyCutThrough: booleanString.default(true),
  bodyCutThroughHoldMs: positiveInt.default(DEFAULT_CUT_THROUGH_HOLD_MS),
  headersTimeoutMs: positiveInt.default(30_000),
  bodyIdleTimeoutMs: positiveInt.default(DEFAULT_BODY_IDLE_TIMEOUT_MS),
  bodyTimeoutMs: positiveInt.default(DEFAULT_BODY_TIMEOUT_MS),
  keepAliveTimeoutMs: positiveInt.default(65_000),
  writeTimeoutMs: positiveInt.default(DEFAULT_WRITE_TIMEOUT_MS),
  slowReaderTimeoutMs: positiveInt.default(1000),
  maxResponseBufferBytes: positiveBytes.default(8 * 1024 * 1024),
  maxBufferedBytes: positiveBytes.default(128 * 1024 * 1024),
  maxConnections: intString(0, 10_000_000).default(10_000),
  maxConnectionsPerClient: intString(0, 10_000_000).default(256),
  compositeMaxBodyBytes: positiveBytes.default(DEFAULT_COMPOSITE_LIMITS.maxBodyBytes),
  compositeMaxMemberRequests: intString(1, 100_000).default(DEFAULT_COMPOSITE_LIMITS.maxMemberRequests),
  compositeMaxMembersInFlight: intString(1, 10_000).default(DEFAULT_COMPOSITE_LIMITS.maxMembersInFlight),
  compositeMaxInFlight: intString(1, 1_000_000).default(DEFAULT_COMPOSITE_LIMITS.maxInFlight),
  compositeMaxInFlightPerClient: intString(1, 1_000_000).default(DEFAULT_COMPOSITE_LIMITS.maxInFlightPerClient),
  compositeMaxBytesPerClient: positiveBytes.default(DEFAULT_COMPOSITE_LIMITS.maxBytesPerClient),
  compositeWorkers: intString(0, 64).default(DEFAULT_COMPOSITE_LIMITS.workers),
  ...logOptionsShape,
});

const specs: OptionSpecs<typeof routerConfigSchema.shape> = {
  discovery: { flag: 'discovery', env: 'MODELMUX_DISCOVERY', help: 'Where routes and replicas come from: static (--routes) or kube (MultiplexedDeployments and their pods). Default static.' },
  host: { flag: 'host', env: 'MODELMUX_HOST', help: 'Address to listen on. Default 0.0.0.0.' },
  port: { flag: 'port', env: 'MODELMUX_PORT', help: 'Port to listen on (0: any free port). Default 8000.' },
  adminPort: {
    flag: 'admin-port',
    env: 'MODELMUX_ADMIN_PORT',
    help: `Port of /metrics, /routes, /healthz, /readyz and the model repository API (…/v2/repository/…), which the public port does not serve; never expose it (0: any free port; -1: none). Default ${DEFAULT_ADMIN_PORT}.`,
  },
  adminHost: { flag: 'admin-host', env: 'MODELMUX_ADMIN_HOST', help: 'Address the admin port listens on. Default: --host.' },
  repositoryApiToken: {
    flag: 'repository-api-token',
    env: 'MODELMUX_REPOSITORY_API_TOKEN',
    help: 'Serve the model repository API on the public port too, to callers that send Authorization: Bearer <this token> (16-256 characters; prefer the variable, flags show in ps). Default: the public port refuses it (403 repository_api_disabled).',
  },
  grpcPort: {
    flag: 'grpc-port',
    env: 'MODELMUX_GRPC_PORT',
    help: `Port of the Open Inference Protocol's gRPC service (inference.GRPCInferenceService, HTTP/2; 0: any free port; -1: none). Default ${DEFAULT_GRPC_PORT}, as Triton's.`,
  },
  grpcMaxResponseBytes: {
    flag: 'grpc-max-response-bytes',
    env: 'MODELMUX_GRPC_MAX_RESPONSE_BYTES',
    help: 'Largest gRPC answer taken from a replica, e.g. 64Mi; past it RESOURCE_EXHAUSTED (requests are bounded by --max-body-bytes). Default 64Mi.',
  },
  grpcMaxConcurrentStreams: { flag: 'grpc-max-concurrent-streams', env: 'MODELMUX_GRPC_MAX_CONCURRENT_STREAMS', help: 'gRPC calls open at once on one client connection. Default 256.' },
  grpcMaxConnectionAgeMs: {
    flag: 'grpc-max-connection-age-ms',
    env: 'MODELMUX_GRPC_MAX_CONNECTION_AGE_MS',
    help: 'A gRPC client connection is asked to go away (GOAWAY) after this long, its calls given --shutdown-grace-ms to end, so clients rebalance over router replicas (0: never). Default 0.',
  },
  grpcMaxResetsPerClient: {
    flag: 'grpc-max-resets-per-client',
    env: 'MODELMUX_GRPC_MAX_RESETS_PER_CLIENT',
    help: `gRPC calls one client address may cancel (RST_STREAM) before their answer within ${RESET_WINDOW_MS / 1000} s, when they are also more than half of its calls; past it its connections are closed (GOAWAY ENHANCE_YOUR_CALM) and new ones refused for ${RESET_WINDOW_MS / 1000} s (0: no budget). Default ${DEFAULT_GRPC_MAX_RESETS}.`,
  },
  grpcUpstream: {
    flag: 'grpc-upstream',
    env: 'MODELMUX_GRPC_UPSTREAM',
    help: "How gRPC calls reach a replica: http1 (the router's internal gRPC form on the pooled connections to its HTTP port, ADR 0054; a replica that answers it 404, an older version, gets its calls over HTTP/2 from then on) or http2 (a stream to its gRPC port). Default http1.",
  },
  grpcFraming: {
    flag: 'grpc-framing',
    env: 'MODELMUX_GRPC_FRAMING',
    help: "Whose HTTP/2 framing serves the gRPC port's clients: own (the router's frame reader, flow control and one socket write per answer, ADR 0055) or nghttp2 (node:http2). Default own.",
  },
  routes: { flag: 'routes', env: 'MODELMUX_ROUTES', help: 'Static routes: "/wine=http://127.0.0.1:8081,http://127.0.0.1:8082;/beer=http://…". Required with --discovery static.' },
  routesFile: {
    flag: 'routes-file',
    env: 'MODELMUX_ROUTES_FILE',
    help: 'Static mode: a YAML file of ModelRoute objects (several documents), read at start; spec.deploymentRef.name is the route prefix without its slash (docs/routes.md). Kube mode watches ModelRoutes instead.',
  },
  mirrorMaxInFlight: {
    flag: 'mirror-max-in-flight',
    env: 'MODELMUX_MIRROR_MAX_IN_FLIGHT',
    help: `Mirror copies of split-route requests under way at once; past it copies are dropped and counted, never queued (0: no mirroring). Default ${DEFAULT_MIRROR_MAX_IN_FLIGHT}.`,
  },
  maxOngoingRequests: { flag: 'max-ongoing-requests', env: 'MODELMUX_MAX_ONGOING_REQUESTS', help: 'Static mode: requests per replica before it counts as full. Default 16 (kube: from the resource).' },
  matchTimeoutSeconds: { flag: 'match-timeout-seconds', env: 'MODELMUX_MATCH_TIMEOUT_SECONDS', help: 'Static mode: matching timeout t; a request waits [t, 2t] for a full holder. Default 1.' },
  pollIntervalMs: { flag: 'poll-interval-ms', env: 'MODELMUX_POLL_INTERVAL_MS', help: "Static mode: how often each replica's GET /models is read. Default 500." },
  namespace: { flag: 'namespace', env: 'MODELMUX_NAMESPACE', help: 'Kube mode: watch only this namespace. Default: all namespaces.' },
  maxBodyBytes: {
    flag: 'max-body-bytes',
    env: 'MODELMUX_MAX_BODY_BYTES',
    help: 'Largest request body or gRPC request message, e.g. 8Mi; past it 413 body_too_large (gRPC: RESOURCE_EXHAUSTED). The replica has the same flag and default. Default 8Mi.',
  },
  requestTimeoutMs: {
    flag: 'request-timeout-ms',
    env: 'MODELMUX_REQUEST_TIMEOUT_MS',
    help: 'Deadline of a request once its body is in: waiting for a slot, the tries and the answer; past it 504 timeout. Default 60000.',
  },
  tryTimeoutMs: {
    flag: 'try-timeout-ms',
    env: 'MODELMUX_TRY_TIMEOUT_MS',
    help: 'Longest one try at one replica waits for its response headers: the cap of the adaptive try timeout, and the timeout of a try that loads its model or may not be retried; past it 504 timeout. Default 30000.',
  },
  tryTimeoutFloorMs: {
    flag: 'try-timeout-floor-ms',
    env: 'MODELMUX_TRY_TIMEOUT_FLOOR_MS',
    help: 'Shortest adaptive try timeout: a try at a replica that has its model loaded is given up for another replica after max(this, multiple × the recent p99 latency of its model or route). Default 1000.',
  },
  tryTimeoutMultiple: { flag: 'try-timeout-multiple', env: 'MODELMUX_TRY_TIMEOUT_MULTIPLE', help: 'The adaptive try timeout as a multiple of the recent p99 latency. Default 5.' },
  maxRetries: {
    flag: 'max-retries',
    env: 'MODELMUX_MAX_RETRIES',
    help: 'Retries of one request on other replicas: after a connection failure, a refusal (overloaded, shutting down), a 502/504, the adaptive try timeout, or its replica marked down (0-5). Default 2.',
  },
  retryBudgetPercent: {
    flag: 'retry-budget-percent',
    env: 'MODELMUX_RETRY_BUDGET_PERCENT',
    help: `Retries a route may make per 100 of its requests over the last ${WINDOW_MS / 1000} s (plus ${MIN_PER_SECOND} a second), so retries cannot multiply an overload. Default 20.`,
  },
  outlierConsecutiveFailures: {
    flag: 'outlier-consecutive-failures',
    env: 'MODELMUX_OUTLIER_CONSECUTIVE_FAILURES',
    help: 'Failed tries in a row (timeouts, broken connections, 502/504) that eject a replica from placement; a refused connection ejects at once. Default 3.',
  },
  outlierEjectionMs: { flag: 'outlier-ejection-ms', env: 'MODELMUX_OUTLIER_EJECTION_MS', help: "A replica's first ejection; each further one before it answers again doubles. Default 2000." },
  outlierMaxEjectionMs: { flag: 'outlier-max-ejection-ms', env: 'MODELMUX_OUTLIER_MAX_EJECTION_MS', help: 'Longest ejection. Default 30000.' },
  outlierMaxEjectedPercent: {
    flag: 'outlier-max-ejected-percent',
    env: 'MODELMUX_OUTLIER_MAX_EJECTED_PERCENT',
    help: "Most of a route's replicas ejected at once, in percent (at least one). Default 50.",
  },
  maxQueue: { flag: 'max-queue', env: 'MODELMUX_MAX_QUEUE', help: 'Requests that may wait for a slot per route; past it 503 pool_saturated. Default 1024.' },
  zeroHoldMs: {
    flag: 'zero-hold-ms',
    env: 'MODELMUX_ZERO_HOLD_MS',
    help: 'A request to a route with no replica (scaled to zero) is held this long for one to become ready, then 503 no_replicas (0: at once). Default 30000.',
  },
  zeroHoldMax: { flag: 'zero-hold-max', env: 'MODELMUX_ZERO_HOLD_MAX', help: 'Requests held per route with no replica; past it 503 no_replicas at once. Default 256.' },
  recentMs: { flag: 'recent-ms', env: 'MODELMUX_RECENT_MS', help: 'How long a replica this router sent a model to counts as holding it. Default 5000.' },
  connectionsPerReplica: { flag: 'connections-per-replica', env: 'MODELMUX_CONNECTIONS_PER_REPLICA', help: 'Keep-alive connections per replica. Default 64.' },
  shutdownGraceMs: { flag: 'shutdown-grace-ms', env: 'MODELMUX_SHUTDOWN_GRACE_MS', help: 'On SIGTERM, how long in-flight requests may finish. Default 25000.' },
  fastPath: {
    flag: 'fast-path',
    env: 'MODELMUX_FAST_PATH',
    help: "Read plain HTTP/1.1 requests with the router's own reader, the rest with node:http; false: node:http reads every request. Default true.",
  },
  bodyCutThrough: {
    flag: 'body-cut-through',
    env: 'MODELMUX_BODY_CUT_THROUGH',
    help: 'Send a request body of 64 KiB or more with a Content-Length on to its replica as it arrives, kept whole for retries; false: read it whole before placing the request. Default true.',
  },
  bodyCutThroughHoldMs: {
    flag: 'body-cut-through-hold-ms',
    env: 'MODELMUX_BODY_CUT_THROUGH_HOLD_MS',
    help: "Longest a request may hold its replica's slot while its body is cut through; a body not whole by then is taken back (the try cut, the slot freed) and read whole before the request is placed again. Default 2000.",
  },
  headersTimeoutMs: {
    flag: 'headers-timeout-ms',
    env: 'MODELMUX_HEADERS_TIMEOUT_MS',
    help: 'A request head must be complete this long after its first byte; past it 408 request_timeout and the connection closes. Default 30000.',
  },
  bodyIdleTimeoutMs: {
    flag: 'body-idle-timeout-ms',
    env: 'MODELMUX_BODY_IDLE_TIMEOUT_MS',
    help: 'Longest wait for the next byte of a request body or gRPC message; past it 408 request_timeout and the connection closes (gRPC: DEADLINE_EXCEEDED, the call ends). Default 30000.',
  },
  bodyTimeoutMs: {
    flag: 'body-timeout-ms',
    env: 'MODELMUX_BODY_TIMEOUT_MS',
    help: 'A request body or gRPC message must be complete this long after its head; past it 408 request_timeout and the connection closes (gRPC: DEADLINE_EXCEEDED, the call ends). Default 120000.',
  },
  keepAliveTimeoutMs: { flag: 'keep-alive-timeout-ms', env: 'MODELMUX_KEEP_ALIVE_TIMEOUT_MS', help: 'An idle client connection is closed after this long. Default 65000.' },
  writeTimeoutMs: {
    flag: 'write-timeout-ms',
    env: 'MODELMUX_WRITE_TIMEOUT_MS',
    help: 'A client connection whose answer bytes make no progress this long (the client does not read) is closed; a gRPC call whose answer does not move is reset. Default 30000.',
  },
  slowReaderTimeoutMs: {
    flag: 'slow-reader-timeout-ms',
    env: 'MODELMUX_SLOW_READER_TIMEOUT_MS',
    help: "Once the router holds all it may of an answer for a client that does not read it, how long the replica's slot waits for that client before the exchange ends (ADR 0026). Default 1000.",
  },
  maxResponseBufferBytes: {
    flag: 'max-response-buffer-bytes',
    env: 'MODELMUX_MAX_RESPONSE_BUFFER_BYTES',
    help: 'Most of one answer the router holds for a client that reads slowly, so that its replica is freed, e.g. 8Mi. Default 8Mi.',
  },
  maxBufferedBytes: {
    flag: 'max-buffered-bytes',
    env: 'MODELMUX_MAX_BUFFERED_BYTES',
    help: 'Request bodies, gRPC messages (as they arrive) and the answers clients have not taken that the router holds at once, HTTP and gRPC together; past it 503 buffer_full (gRPC: RESOURCE_EXHAUSTED). Default 128Mi.',
  },
  maxConnections: {
    flag: 'max-connections',
    env: 'MODELMUX_MAX_CONNECTIONS',
    help: 'Client connections open at once; past it 503 connection_limit and the connection closes (0: no limit). Default 10000.',
  },
  maxConnectionsPerClient: {
    flag: 'max-connections-per-client',
    env: 'MODELMUX_MAX_CONNECTIONS_PER_CLIENT',
    help: 'Client connections open at once from one address; past it 429 client_connection_limit and the connection closes (0: no limit; raise it behind a gateway). Default 256.',
  },
  compositeMaxBodyBytes: {
    flag: 'composite-max-body-bytes',
    env: 'MODELMUX_COMPOSITE_MAX_BODY_BYTES',
    help: 'Largest body of an ensemble or sequence request (at most --max-body-bytes): the router parses it and sends it to every member; past it 413 body_too_large. Default 4Mi.',
  },
  compositeMaxMemberRequests: {
    flag: 'composite-max-member-requests',
    env: 'MODELMUX_COMPOSITE_MAX_MEMBER_REQUESTS',
    help: 'Member requests one ensemble or sequence request may cause, counting those of the composite routes it names at every level; past it 502 composite_member_limit. Default 64.',
  },
  compositeMaxMembersInFlight: {
    flag: 'composite-max-members-in-flight',
    env: 'MODELMUX_COMPOSITE_MAX_MEMBERS_IN_FLIGHT',
    help: 'Of those, under way at once (the replica slots one request may hold); the others wait for one to end. Default 4.',
  },
  compositeMaxInFlight: {
    flag: 'composite-max-in-flight',
    env: 'MODELMUX_COMPOSITE_MAX_IN_FLIGHT',
    help: 'Ensemble and sequence requests under way at once, all clients together; past it 503 composite_saturated. Default 64.',
  },
  compositeMaxInFlightPerClient: {
    flag: 'composite-max-in-flight-per-client',
    env: 'MODELMUX_COMPOSITE_MAX_IN_FLIGHT_PER_CLIENT',
    help: 'Of those, from one client address; past it 429 composite_client_limit (raise it behind a gateway). Default 8.',
  },
  compositeMaxBytesPerClient: {
    flag: 'composite-max-bytes-per-client',
    env: 'MODELMUX_COMPOSITE_MAX_BYTES_PER_CLIENT',
    help: "Of the byte budget (--max-buffered-bytes), the most one client address's ensemble and sequence requests hold at once: bodies, members' bodies and answers; past it 429 composite_client_limit. Default 64Mi.",
  },
  compositeWorkers: {
    flag: 'composite-workers',
    env: 'MODELMUX_COMPOSITE_WORKERS',
    help: 'Worker threads that parse, combine and write the tensors of ensemble and sequence requests, so that this work does not hold up the event loop that serves every client (0: the event loop does it). Default 1.',
  },
  ...logOptionSpecs,
};

export type RouterConfig = z.infer<typeof routerConfigSchema> & { staticRoutes: StaticRoute[] };

export const ROUTER_SUMMARY = 'Route each request to a replica that holds its model (V2, Ray and SageMaker request forms).';

export function parseRouterConfig(argv: readonly string[], env: NodeJS.ProcessEnv): RouterConfig {
  const schema = routerConfigSchema.superRefine((c, ctx) => {
    if (c.discovery !== 'static') {
      if (c.routesFile !== undefined) ctx.addIssue({ code: 'custom', path: ['routesFile'], message: '--routes-file is for static discovery; kube discovery watches ModelRoutes' });
      return;
    }
    if (c.routes === undefined) ctx.addIssue({ code: 'custom', path: ['routes'], message: 'static discovery needs --routes' });
  });
  const c = parseConfig('router', ROUTER_SUMMARY, schema, specs, argv, env);
  return { ...c, staticRoutes: c.routes === undefined ? [] : parseStaticRoutes(c.routes).routes };
}
