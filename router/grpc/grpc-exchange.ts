import { Metadata, status as GrpcStatus, type ClientUnaryCall, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { ERROR_CATALOGUE, ModelmuxError, toModelmuxError, type ErrorCode } from '../../common/errors.js';
import { ERROR_CODE_TRAILER } from '../../common/grpc/inference-service.js';
import { scanRequest } from '../../common/grpc/message-scan.js';
import { grpcError, grpcStatus } from '../../common/grpc/status.js';
import type { CancelReason, UnaryCall } from '../../common/grpc/unary-call.js';
import { HEADER_BACKEND, HEADER_CACHE, HEADER_OVERLOADED, HEADER_REQUEST_ID, HEADER_TABLE_VERSION } from '../../common/names.js';
import { versionedModel } from '../../common/request-grammar.js';
import type { Lease } from '../placement/balancer.js';
import { addressedTo } from './grpc-head.js';
import { serveGrpcComposite } from './grpc-composite.js';
import type { CompositeContext } from '../composite/composite-route.js';
import type { GrpcUpstreams } from './grpc-upstreams.js';
import type { RetryReason, RouteMetrics } from '../metrics.js';
import type { RouterContext } from '../exchange/context.js';
import { acceptedRequestId } from '../../common/request-id.js';
import { ModelRouteMetrics } from '../routes/route-metrics.js';
import type { Route } from '../routes/route-table.js';
import { TryAttempts } from '../exchange/try-attempts.js';

/** The calls the router forwards to a replica; ServerLive and ServerReady it answers itself. */
export type ForwardedMethod = 'ModelInfer' | 'ModelMetadata' | 'ModelReady' | 'ServerMetadata';

/**
 * The metadata key that names a call's route (`wine` or `/wine`): gRPC has no path prefix to
 * carry it. A router with one route needs none.
 */
export const GRPC_ROUTE_METADATA = 'x-modelmux-route';

/** What every gRPC exchange of one server shares: the HTTP side's routes, limits and metrics, and the replicas' channels. */
export interface GrpcContext {
  router: RouterContext;
  upstreams: GrpcUpstreams;
  /** Where calls to ensembles and sequences go (grpc-composite.ts). */
  composites: CompositeContext;
}

/** The (de)serializer of bytes the router forwards as they are. */
const passThrough = (bytes: Buffer): Buffer => bytes;

/** Request metadata the forwarded call gets anew: grpc-js writes its user-agent, the router the other two. */
const OWN_METADATA = ['user-agent', HEADER_REQUEST_ID, 'x-forwarded-for'];

/** Response headers of the replica's connection, not of its answer: the router's server writes its own. */
const TRANSPORT_METADATA = ['content-type', 'date', 'grpc-encoding', 'grpc-accept-encoding'];

/** A catalogue code read from a trailer, when it is one. */
function catalogueCode(value: unknown): ErrorCode | undefined {
  return typeof value === 'string' && Object.hasOwn(ERROR_CATALOGUE, value) ? (value as ErrorCode) : undefined;
}

/** The replica's error code of a failed try, and whether nothing listened there (outlier detection ejects at once). */
function upstreamError(err: ServiceError | StatusObject): { code: ErrorCode | undefined; refused: boolean } {
  const code = catalogueCode(err.metadata?.get(ERROR_CODE_TRAILER)[0]);
  return { code, refused: code === undefined && /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH/.test(err.details) };
}

function firstString(md: Metadata | undefined, key: string): string | undefined {
  const v = md?.get(key)[0];
  return typeof v === 'string' ? v : undefined;
}

/** The call's text metadata as HTTP's flat raw header list, where a split looks up its sticky header. */
function metadataPairs(md: Metadata): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(md.getMap())) if (typeof value === 'string') out.push(key, value);
  return out;
}

/**
 * One forwarded gRPC call, placed exactly as an HTTP request is (route, model key, the route's
 * balancer: holders, loads, hot copies, matching timeout, queue bound, outlier detection, retry
 * budget) and forwarded as the bytes it came in, over the replica's channel; the answer's
 * bytes go back unchanged (ADR 0037). Its request and try deadlines are one entry of the shared
 * deadline sweep, as an HTTP exchange's (ADR 0014). A try is retried on another replica only
 * where HTTP retries: the replica could not be reached or broke off before answering
 * (UNAVAILABLE without an error code of the replica's), refused it at once (overloaded,
 * shutting_down), outlived its adaptive timeout, or was marked down while it waited.
 */
export class GrpcExchange extends TryAttempts {
  private requestId = '';
  private metadata: Metadata | undefined;
  /** The request message forwarded: as received (the server holds it in the byte budget), or renamed for a ModelRoute's backend. */
  private message: Buffer | undefined;
  /** Bytes of the renamed copy, which this exchange holds in the byte budget. */
  private budgeted = 0;
  private upstream: ClientUnaryCall | undefined;
  private grpcCode: GrpcStatus = GrpcStatus.OK;
  private httpStatus = 200;
  private error: ErrorCode | undefined;
  /** The call named a split ModelRoute: its public name and the model that serves it. */
  private routed: { route: string; backend: string } | undefined;

  constructor(
    private readonly ctx: GrpcContext,
    private readonly method: ForwardedMethod,
    private readonly call: UnaryCall,
  ) {
    super(ctx.router, 'waiting');
  }

  start(): void {
    const { router } = this.ctx;
    const call = this.call;
    call.onCancel(this.onCancelled);
    try {
      const given = call.metadataValue(HEADER_REQUEST_ID);
      this.requestId = acceptedRequestId(given) ?? router.requestIds.next();
      const route = this.selectRoute();
      this.route = route;
      this.routeMetrics = router.metrics.forRoute(route.prefix);
      const raw = call.message;
      // The replicas' own rule of which messages are valid, so the router forwards none they would
      // refuse, and none whose decode would cost a replica more than its bytes (ADR 0039).
      const head = scanRequest(this.method, raw);
      if (this.method !== 'ServerMetadata') {
        if (head.name === '') throw new ModelmuxError('missing_model_id', `the ${this.method} request names no model`);
        this.model = versionedModel(head.name, head.version === '' ? undefined : head.version);
      }
      // One lookup for a plain model, as over HTTP.
      const message = this.model !== undefined && route.models.has(this.model) ? this.resolveRoute(route, raw) : raw;
      if (message === undefined) return;
      if (message !== raw) {
        if (!router.buffered.take(message.length)) throw router.buffered.fullError();
        this.budgeted = message.length;
      }
      this.message = message;
      const md = call.metadata().clone();
      for (const key of OWN_METADATA) md.remove(key);
      md.set(HEADER_REQUEST_ID, this.requestId);
      const forwardedFor = call.metadataValue('x-forwarded-for');
      md.set('x-forwarded-for', forwardedFor === undefined ? call.client : `${forwardedFor}, ${call.client}`);
      this.metadata = md;
      const now = router.clock.now();
      this.requestDeadline = now + Math.min(router.limits.requestTimeoutMs, Math.max(0, call.deadlineAt - Date.now()));
      this.deadlineAt = this.requestDeadline;
      router.deadlines.add(this);
      this.place();
    } catch (err) {
      this.fail(err);
    }
  }

  /**
   * The model is a ModelRoute's public name: the call goes to the backend the route picks (by
   * weight, or by the value of the split's stickyHeader in the call's metadata), renamed so in
   * its message. Mirrors are HTTP's only (ADR 0037). An ensemble or a sequence answers the call
   * itself (grpc-composite.ts, ADR 0050): undefined, this exchange is done.
   */
  private resolveRoute(route: Route, raw: Buffer): Buffer | undefined {
    const model = this.model as string;
    const r = route.models.resolve(model, metadataPairs(this.call.metadata()));
    if (r.kind !== 'model') {
      this.markDone();
      if (this.method !== 'ServerMetadata') serveGrpcComposite(this.ctx.composites, this.call, this.method, route, r.route, this.requestId);
      return undefined;
    }
    this.routed = { route: r.routes[0] as string, backend: r.model };
    this.model = r.model;
    return addressedTo(raw, r.model);
  }

  private selectRoute(): Route {
    const routes = this.router.routes;
    const named = this.call.metadataValue(GRPC_ROUTE_METADATA);
    if (named !== undefined) {
      const prefix = named.startsWith('/') ? named : `/${named}`;
      const route = routes.match(prefix);
      if (route === undefined) throw new ModelmuxError('route_not_found', `no route serves ${prefix}`);
      return route;
    }
    const all = routes.all();
    if (all.length === 1) return all[0] as Route;
    throw new ModelmuxError('route_not_found', all.length === 0 ? 'the router has no route' : `the router has ${all.length} routes: name one in the ${GRPC_ROUTE_METADATA} metadata`);
  }

  // --- placement ----------------------------------------------------------------------------

  protected dispatch(lease: Lease): void {
    const route = this.route as Route;
    this.beginTry(lease);
    this.phase = 'upstream';
    this.timeTry(lease);
    const now = this.tryStart;
    const client = this.ctx.upstreams.get(lease.replica);
    if (client === undefined) {
      // A replica that serves no gRPC (an older image, or its port unknown) is no place for the call.
      return this.tryFailed(new ModelmuxError('upstream_unavailable', `replica ${lease.replica} serves no gRPC port`), 'refused');
    }
    route.balancer.watch(lease, this);
    // grpc-js ends the call itself at the earlier of the request deadline and the try's cap;
    // the adaptive timeout, earlier, is the sweep's (it may retry rather than fail).
    const deadline = new Date(Date.now() + Math.max(0, Math.min(this.requestDeadline, this.tryCapAt) - now));
    let message: Buffer | undefined;
    let upstream: ClientUnaryCall;
    try {
      upstream = client.makeUnaryRequest<Buffer, Buffer>(
        `/inference.GRPCInferenceService/${this.method}`,
        passThrough,
        passThrough,
        this.message as Buffer,
        this.metadata as Metadata,
        { deadline },
        (_err, value) => {
          message = value;
        },
      );
    } catch (err) {
      // The channel was closed under the lease (the replica just left the route): as a refused connection.
      route.balancer.unwatch(lease, this);
      return this.tryFailed(new ModelmuxError('upstream_unavailable', `replica ${lease.replica}: ${err instanceof Error ? err.message : String(err)}`), 'failed');
    }
    let head: Metadata | undefined;
    upstream.on('metadata', (md: Metadata) => {
      head = md;
    });
    // grpc-js emits the status right after the callback, with the trailers of an OK answer too.
    upstream.on('status', (s: StatusObject) => this.onUpstreamEnd(upstream, s, head, message));
    this.upstream = upstream;
  }

  protected endTry(): void {
    this.upstream = undefined;
    this.releaseLease();
  }

  /** A try that never reached a replica's application: retried if it may be, else the call fails with `err`. */
  private tryFailed(err: ModelmuxError, outcome: 'refused' | 'failed'): void {
    this.report(outcome);
    if (this.mayRetry()) return this.retry('connect_error');
    this.endTry();
    this.fail(err);
  }

  replicaDown(): void {
    if (this.phase !== 'upstream' || this.abandoning !== undefined || this.upstream === undefined) return;
    if (this.mayRetry()) this.abandon('replica_down');
  }

  protected abandon(reason: RetryReason): void {
    this.abandoning = reason;
    // The call ends with CANCELLED, and its status retries.
    this.upstream?.cancel();
  }

  private onUpstreamEnd(upstream: ClientUnaryCall, s: StatusObject, head: Metadata | undefined, message: Buffer | undefined): void {
    if (upstream !== this.upstream) return;
    const replica = this.replica as string;
    const balancer = (this.route as Route).balancer;
    // Told before outlier detection hears of this try, so an ejection it causes does not abandon it too.
    balancer.unwatch(this.lease as Lease, this);
    try {
      if (this.phase !== 'upstream') return this.endTry();
      if (this.abandoning !== undefined) return this.retry(this.abandoning);
      const ms = this.router.clock.now() - this.tryStart;
      if (s.code === GrpcStatus.UNAVAILABLE) {
        const { code, refused } = upstreamError(s);
        if (code === undefined) return this.tryFailed(new ModelmuxError('upstream_unavailable', `replica ${replica} failed: ${s.details}`), refused ? 'refused' : 'failed');
        balancer.reportTry(replica, this.model, 'answered');
        // Refused before any work (overloaded, shutting down), as HTTP's 503 with x-modelmux-overloaded.
        if (s.metadata.get(HEADER_OVERLOADED).length > 0 && this.mayRetry()) return this.retry('overloaded');
      } else if (s.code === GrpcStatus.DEADLINE_EXCEEDED && catalogueCode(s.metadata.get(ERROR_CODE_TRAILER)[0]) === undefined) {
        // grpc-js ended the try at its deadline (the sweep had not yet): the replica did not answer in time.
        this.report('failed');
        this.router.metrics.timedOut(this.tryCapAt < this.requestDeadline ? 'upstream' : 'request');
        this.endTry();
        return this.fail(new ModelmuxError('timeout', `replica ${replica} did not answer in time`));
      } else {
        (this.routeMetrics as RouteMetrics).upstreamLatency(ms / 1000);
        // The replica says whether it had the model in its trailers (replica/grpc/grpc-server.ts).
        const cache = firstString(s.metadata, HEADER_CACHE) ?? firstString(head, HEADER_CACHE);
        const warm = s.code === GrpcStatus.OK && (this.model === undefined || cache === 'hit');
        balancer.reportTry(replica, this.model, 'answered', warm ? ms : undefined);
        if (this.model !== undefined && s.code === GrpcStatus.OK && cache !== undefined) {
          const version = Number(firstString(s.metadata, HEADER_TABLE_VERSION) ?? firstString(head, HEADER_TABLE_VERSION));
          balancer.observe(replica, this.model, Number.isSafeInteger(version) ? version : undefined);
        }
      }
      this.endTry();
      this.respond(s, head, message);
    } catch (err) {
      this.endTry();
      this.fail(err);
    }
  }

  /** The replica's answer, as it gave it: its message bytes, or its status and trailers. */
  private respond(s: StatusObject, head: Metadata | undefined, message: Buffer | undefined): void {
    this.phase = 'done';
    const md = head ?? new Metadata();
    for (const key of TRANSPORT_METADATA) md.remove(key);
    md.set(HEADER_REQUEST_ID, this.requestId);
    if (this.routed !== undefined) md.set(HEADER_BACKEND, this.routed.backend);
    this.grpcCode = s.code;
    const code = catalogueCode(s.metadata.get(ERROR_CODE_TRAILER)[0]);
    this.httpStatus = s.code === GrpcStatus.OK ? 200 : code !== undefined ? ERROR_CATALOGUE[code].status : 502;
    if (s.code === GrpcStatus.OK && message !== undefined) this.call.answer(message, md, s.metadata);
    else this.call.fail(s.code, s.details, s.metadata, md);
    this.finish();
  }

  protected guard(err: unknown): void {
    this.fail(err);
  }

  // --- endings ----------------------------------------------------------------------------------

  expire(): void {
    try {
      const now = this.router.clock.now();
      if (this.phase === 'waiting') {
        this.router.metrics.timedOut('request');
        return this.fail(new ModelmuxError('timeout', 'no replica slot freed up before the request deadline'));
      }
      if (this.phase === 'upstream' && this.adaptivePending && this.tryDeadline < this.requestDeadline && now < this.tryCapAt) return this.tryTimedOut();
      if (this.phase !== 'upstream') return;
      this.router.metrics.timedOut(this.deadlineAt < this.requestDeadline ? 'upstream' : 'request');
      this.fail(new ModelmuxError('timeout', `replica ${this.replica ?? '?'} did not answer in time`));
    } catch (err) {
      this.fail(err);
    }
  }

  /** The client cancelled the call, or its deadline passed: no work for nobody. */
  private readonly onCancelled = (why: CancelReason): void => {
    if (this.phase === 'done') return;
    this.fail(
      why === 'deadline' ? new ModelmuxError('timeout', "the call's deadline passed before its answer") : new ModelmuxError('client_closed', 'the client cancelled the call before its answer'),
    );
  };

  /** Answers the router's own error with its gRPC status and code trailer, stops any wait or try. */
  protected fail(err: unknown): void {
    if (this.phase === 'done') return;
    this.markDone();
    const e = toModelmuxError(err);
    this.error = e.code;
    this.httpStatus = e.status;
    const upstream = this.upstream;
    this.endTry();
    upstream?.cancel();
    this.grpcCode = grpcStatus(e.code);
    if (e.code === 'internal') this.router.log.error('request failed', { requestId: this.requestId, code: e.code, reason: e.message });
    try {
      const trailers = new Metadata();
      trailers.set(HEADER_REQUEST_ID, this.requestId);
      if (this.routed !== undefined) trailers.set(HEADER_BACKEND, this.routed.backend);
      const g = grpcError(e, trailers);
      this.call.fail(g.code, g.details, g.metadata);
    } catch (again) {
      // The last guard: the call is answered whatever broke, never left to its deadline.
      this.router.log.error('unhandled gRPC call error', { requestId: this.requestId, reason: again instanceof Error ? again.message : String(again) });
      this.call.fail(GrpcStatus.INTERNAL, 'unexpected router error');
    }
    this.finish();
  }

  private finish(): void {
    const router = this.router;
    router.deadlines.remove(this);
    router.buffered.release(this.budgeted);
    this.budgeted = 0;
    const ms = router.clock.now() - this.started;
    const route = this.route === undefined ? 'none' : this.route.prefix;
    router.metrics.grpcRequests.labels({ route, method: this.method, code: GrpcStatus[this.grpcCode] ?? String(this.grpcCode) }).inc();
    router.metrics.grpcRequestDuration.labels({ route, method: this.method }).observe(ms / 1000);
    if (this.routed !== undefined) ModelRouteMetrics.for(router.metrics).answered(this.routed.route, this.routed.backend, this.httpStatus);
    router.access.request({
      requestId: this.requestId,
      method: 'GRPC',
      path: `/inference.GRPCInferenceService/${this.method}`,
      route,
      model: this.model,
      form: 'grpc',
      replica: this.replica,
      placement: this.placement,
      waitedMs: this.waitedMs,
      tries: this.tries === 0 ? undefined : this.tries,
      error: this.error,
      status: this.httpStatus,
      durationMs: ms,
    });
  }
}
