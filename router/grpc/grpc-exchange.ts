import type { OutgoingHttpHeaders } from 'node:http2';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { ERROR_CATALOGUE, ModelmuxError, toModelmuxError, type ErrorCode } from '../../common/errors.js';
import { framedMessage, PREFIX_BYTES } from '../../common/grpc/grpc-frame.js';
import { headersOf, responseFields } from '../../common/http2/header-fields.js';
import { GRPC_SERVICE_PATH } from '../../common/grpc/grpc-http1-form.js';
import { fieldValue } from '../http1/http1-syntax.js';
import { scanRequest } from '../../common/grpc/message-scan.js';
import { errorHeaders, grpcStatus } from '../../common/grpc/status.js';
import type { CancelReason, UnaryCall } from '../../common/grpc/unary-call.js';
import { HEADER_BACKEND, HEADER_CACHE, HEADER_OVERLOADED, HEADER_REQUEST_ID, HEADER_TABLE_VERSION } from '../../common/names.js';
import { versionedModel } from '../../common/request-grammar.js';
import type { Lease } from '../placement/balancer.js';
import { addressedTo } from './grpc-head.js';
import { serveGrpcComposite } from './grpc-composite.js';
import type { CompositeContext } from '../composite/composite-route.js';
import { answerFields, forwardedFields, forwardedHeaders, grpcTimeout, passedFields, statusOf, tryHeaders, upstreamError, type Fields, type UpstreamStatus } from './grpc-forward-headers.js';
import type { GrpcSessions } from './grpc-sessions.js';
import { GrpcCallMetrics } from './grpc-call-metrics.js';
import { Http1Try, Http2Try, type GrpcTry, type GrpcTryEvents } from './grpc-upstream-try.js';
import type { RetryReason, RouteMetrics } from '../metrics.js';
import type { RouterContext } from '../exchange/context.js';
import { acceptedRequestId } from '../../common/request-id.js';
import { ModelRouteMetrics } from '../routes/route-metrics.js';
import type { Route } from '../routes/route-table.js';
import { TryAttempts } from '../exchange/try-attempts.js';

const NO_FIELDS: readonly string[] = [];

/** The calls the router forwards to a replica; ServerLive and ServerReady it answers itself. */
export type ForwardedMethod = 'ModelInfer' | 'ModelMetadata' | 'ModelReady' | 'ServerMetadata';

/** Each method's path, built once: a path built per call was a new string to flatten for the access log. */
const METHOD_PATHS: Readonly<Record<ForwardedMethod, string>> = {
  ModelInfer: `${GRPC_SERVICE_PATH}ModelInfer`,
  ModelMetadata: `${GRPC_SERVICE_PATH}ModelMetadata`,
  ModelReady: `${GRPC_SERVICE_PATH}ModelReady`,
  ServerMetadata: `${GRPC_SERVICE_PATH}ServerMetadata`,
};

/**
 * The metadata key that names a call's route (`wine` or `/wine`): gRPC has no path prefix to
 * carry it. A router with one route needs none.
 */
export const GRPC_ROUTE_METADATA = 'x-modelmux-route';

/** What every gRPC exchange of one server shares: the HTTP side's routes, limits and metrics, and the replicas' connections. */
export interface GrpcContext {
  router: RouterContext;
  upstreams: GrpcSessions;
  /** Largest answer message taken from a replica (--grpc-max-response-bytes). */
  maxResponseBytes: number;
  /** Where calls to ensembles and sequences go (grpc-composite.ts). */
  composites: CompositeContext;
  /** How calls reach a replica (--grpc-upstream, ADR 0054): streams to its gRPC port, or the HTTP/1.1 form on its HTTP port. */
  upstream: 'http2' | 'http1';
}

/**
 * One forwarded gRPC call, placed exactly as an HTTP request is (route, model key, the route's
 * balancer: holders, loads, hot copies, matching timeout, queue bound, outlier detection, retry
 * budget) and forwarded as the bytes it came in, as one stream of a pooled HTTP/2 connection to
 * the replica (grpc-sessions.ts); the answer's headers, message bytes and trailers go back as
 * they come (ADR 0037, ADR 0049), so the router never holds a whole answer. Its request and try
 * deadlines are one entry of the shared deadline sweep, as an HTTP exchange's (ADR 0014). A try
 * is retried on another replica only where HTTP retries: the replica could not be reached or
 * broke off before answering (UNAVAILABLE without an error code of the replica's), refused it at
 * once (overloaded, shutting_down), outlived its adaptive timeout, or was marked down while it
 * waited — and only while no byte of its answer has gone to the client.
 */
export class GrpcExchange extends TryAttempts implements GrpcTryEvents {
  private requestId = '';
  /** The request headers every try sends, but for its grpc-timeout: as an HTTP/2 header object, made at the first try over HTTP/2. */
  private forwarded: OutgoingHttpHeaders | undefined;
  /** The same as the upstream pool's flat list, made at the first try of the HTTP/1.1 form. */
  private forwardedList: string[] | undefined;
  /** The request message forwarded: as received (the server holds it in the byte budget), or renamed for a ModelRoute's backend. */
  private message: Buffer | undefined;
  /** Bytes of the renamed copy, which this exchange holds in the byte budget. */
  private budgeted = 0;
  /** The try in flight, on either upstream. */
  private upstream: GrpcTry | undefined;
  /** The message with its prefix, the body of every try of the HTTP/1.1 form. */
  private framed: Buffer | undefined;
  /** The answer's response headers, until its first message bytes commit the call to it. */
  private head: Fields | undefined;
  /** Answer bytes received before the 5-byte prefix was whole (nothing has gone out yet). */
  private pending: Buffer[] = [];
  private answerBytes = 0;
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
    const r = route.models.resolve(model, this.call.textMetadata());
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
    this.head = undefined;
    this.pending = [];
    this.answerBytes = 0;
    const sessions = this.ctx.upstreams.get(lease.replica);
    if (this.ctx.upstream === 'http1' && sessions?.servesHttp1Form !== false) {
      const pool = route.pools.get(lease.replica);
      if (pool === undefined) return this.tryFailed(new ModelmuxError('upstream_unavailable', `replica ${lease.replica} has no connection pool`), 'refused');
      route.balancer.watch(lease, this);
      const t = new Http1Try(this);
      this.upstream = t;
      // The bytes as they came where the message is not renamed: no copy.
      this.framed ??= this.message === this.call.message ? this.call.framed : framedMessage(this.message as Buffer);
      this.forwardedList ??= forwardedFields(this.call.headers, this.requestId, this.call.client);
      // slice and push, not concat: Array#concat is a call into C++ (the router's profile).
      const headers = this.forwardedList.slice();
      headers.push('grpc-timeout', grpcTimeout(this.remainingMs()));
      return t.send(pool, METHOD_PATHS[this.method], headers, this.framed);
    }
    this.sendHttp2(lease);
  }

  /** The replica ends the call at the earlier of the request deadline and the try's cap too; the sweep's deadlines (the adaptive one first) are the router's, which may retry rather than fail. */
  private remainingMs(): number {
    return Math.max(0, Math.min(this.requestDeadline, this.tryCapAt) - this.router.clock.now());
  }

  private sendHttp2(lease: Lease): void {
    const route = this.route as Route;
    const sessions = this.ctx.upstreams.get(lease.replica);
    if (sessions === undefined) {
      // A replica that serves no gRPC (an older image, or its port unknown) is no place for the call.
      return this.tryFailed(new ModelmuxError('upstream_unavailable', `replica ${lease.replica} serves no gRPC port`), 'refused');
    }
    route.balancer.watch(lease, this);
    const t = new Http2Try(this);
    this.upstream = t;
    try {
      this.forwarded ??= forwardedHeaders(this.call.headers, METHOD_PATHS[this.method], this.requestId, this.call.client);
      t.send(sessions, tryHeaders(this.forwarded, sessions.address, this.remainingMs()), this.message as Buffer);
    } catch (err) {
      // The replica just left the route under the lease: as a refused connection.
      this.upstream = undefined;
      route.balancer.unwatch(lease, this);
      return this.tryFailed(new ModelmuxError('upstream_unavailable', `replica ${lease.replica}: ${err instanceof Error ? err.message : String(err)}`), 'failed');
    }
  }

  /**
   * An older replica answered the HTTP/1.1 form 404 before any work: remembered for it, and the
   * call goes to it again at once over HTTP/2, on the same lease — no failure, no retry spent.
   */
  formUnserved(upstream: GrpcTry): void {
    if (upstream !== this.upstream) return;
    const lease = this.lease as Lease;
    this.upstream = undefined;
    const sessions = this.ctx.upstreams.get(lease.replica);
    if (sessions !== undefined) sessions.servesHttp1Form = false;
    if (this.phase !== 'upstream') return;
    if (this.abandoning !== undefined) {
      (this.route as Route).balancer.unwatch(lease, this);
      return this.retry(this.abandoning);
    }
    this.sendHttp2(lease);
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
    // The try's close retries.
    this.upstream?.cancel();
  }

  /** Response headers: trailers-only (a status, no message: the replica's errors) end the try here. */
  response(upstream: GrpcTry, httpStatus: number, headers: Fields): void {
    if (upstream !== this.upstream) return;
    if (httpStatus !== 200) return upstream.cancel();
    if (fieldValue(headers, 'grpc-status') !== undefined) return this.status(upstream, headers);
    this.head = headers;
  }

  /**
   * Answer bytes: held until the message's 5-byte prefix is in and its length within
   * --grpc-max-response-bytes, then the call is committed to this answer (no retry from here on)
   * and every byte is relayed as it comes, the replica's stream paused while the client's is full.
   */
  data(upstream: GrpcTry, chunk: Buffer): void {
    if (upstream !== this.upstream) return;
    this.answerBytes += chunk.length;
    if (this.phase === 'responding') return this.relay(upstream, chunk);
    if (this.phase !== 'upstream' || this.head === undefined) return;
    this.pending.push(chunk);
    if (this.answerBytes < PREFIX_BYTES) return;
    const first = this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending);
    const announced = first.readUInt32BE(1);
    if (announced > this.ctx.maxResponseBytes) return this.tooLarge(announced);
    this.commit();
    this.pending = [];
    this.relay(upstream, first);
  }

  private relay(upstream: GrpcTry, chunk: Buffer): void {
    if (this.answerBytes > PREFIX_BYTES + this.ctx.maxResponseBytes) return this.tooLarge(this.answerBytes - PREFIX_BYTES);
    if (this.call.relay(chunk)) return;
    upstream.pause();
    this.call.stream.once('drain', () => upstream.resume());
  }

  /** The first byte of the answer goes out: the try's clocks stop, the request deadline goes on. */
  private commit(): void {
    this.phase = 'responding';
    this.adaptivePending = false;
    this.deadlineAt = this.requestDeadline;
    this.router.deadlines.add(this);
    this.call.onAnswerClosed(this.onAnswerClosed);
    this.call.startAnswer(answerFields(this.head ?? NO_FIELDS, this.requestId, this.routed?.backend));
  }

  private tooLarge(bytes: number): void {
    const replica = this.replica as string;
    (this.route as Route).balancer.reportTry(replica, this.model, 'answered');
    // RESOURCE_EXHAUSTED, as a gRPC client's own message bound answers.
    this.fail(
      new ModelmuxError('upstream_unavailable', `replica ${replica} answered a message of ${bytes} bytes, larger than --grpc-max-response-bytes (${this.ctx.maxResponseBytes})`),
      GrpcStatus.RESOURCE_EXHAUSTED,
    );
  }

  /** The replica's status (trailers, or trailers-only headers): the try's outcome, and the call's answer. */
  status(upstream: GrpcTry, trailers: Fields): void {
    if (upstream !== this.upstream) return;
    const replica = this.replica as string;
    const balancer = (this.route as Route).balancer;
    // Told before outlier detection hears of this try, so an ejection it causes does not abandon it too.
    balancer.unwatch(this.lease as Lease, this);
    try {
      if (this.phase !== 'upstream' && this.phase !== 'responding') return this.endTry();
      const s = statusOf(trailers);
      if (this.phase === 'upstream') {
        if (this.abandoning !== undefined) return this.retry(this.abandoning);
        if (s.code === GrpcStatus.UNAVAILABLE) {
          const { code, refused } = upstreamError(trailers, s.details);
          if (code === undefined) return this.tryFailed(new ModelmuxError('upstream_unavailable', `replica ${replica} failed: ${s.details}`), refused ? 'refused' : 'failed');
          balancer.reportTry(replica, this.model, 'answered');
          // Refused before any work (overloaded, shutting down), as HTTP's 503 with x-modelmux-overloaded.
          if (fieldValue(trailers, HEADER_OVERLOADED) !== undefined && this.mayRetry()) return this.retry('overloaded');
          return this.respond(s, trailers);
        }
        if (s.code === GrpcStatus.DEADLINE_EXCEEDED && s.errorCode === undefined) {
          // The replica ended the try at the deadline the router sent (the sweep had not yet): it did not answer in time.
          this.report('failed');
          this.router.metrics.timedOut(this.tryCapAt < this.requestDeadline ? 'upstream' : 'request');
          this.endTry();
          return this.fail(new ModelmuxError('timeout', `replica ${replica} did not answer in time`));
        }
      }
      const ms = this.router.clock.now() - this.tryStart;
      (this.routeMetrics as RouteMetrics).upstreamLatency(ms / 1000);
      // The replica says whether it had the model in its trailers (replica/grpc/grpc-server.ts).
      const head = this.head ?? NO_FIELDS;
      const cache = fieldValue(trailers, HEADER_CACHE) ?? fieldValue(head, HEADER_CACHE);
      const ok = s.code === GrpcStatus.OK;
      balancer.reportTry(replica, this.model, 'answered', ok && (this.model === undefined || cache === 'hit') ? ms : undefined);
      if (this.model !== undefined && ok && cache !== undefined) {
        const version = Number(fieldValue(trailers, HEADER_TABLE_VERSION) ?? fieldValue(head, HEADER_TABLE_VERSION));
        balancer.observe(replica, this.model, Number.isSafeInteger(version) ? version : undefined);
      }
      this.respond(s, trailers);
    } catch (err) {
      this.endTry();
      this.fail(err);
    }
  }

  /** The replica's answer, as it gave it: its message and trailers, or its status with its metadata. */
  private respond(s: UpstreamStatus, trailers: Fields): void {
    this.endTry();
    this.grpcCode = s.code;
    this.httpStatus = s.code === GrpcStatus.OK ? 200 : s.errorCode !== undefined ? ERROR_CATALOGUE[s.errorCode].status : 502;
    if (this.phase === 'upstream' && this.pending.length > 0) this.commit();
    if (this.phase === 'responding') {
      for (const chunk of this.pending) this.call.relay(chunk);
      this.pending = [];
      this.call.end(passedFields(trailers));
    } else {
      // One header block: a trailer of the replica's takes the place of a header of the same name.
      this.call.failWithHeaders(s.code, s.details, { ...headersOf(answerFields(this.head ?? NO_FIELDS, this.requestId, this.routed?.backend)), ...headersOf(passedFields(trailers)) });
    }
    this.phase = 'done';
    this.finish();
  }

  /** The replica's stream closed: after its status nothing more; before it, the try broke off. */
  closed(upstream: GrpcTry, reason: string): void {
    if (upstream !== this.upstream) return;
    const balancer = (this.route as Route).balancer;
    balancer.unwatch(this.lease as Lease, this);
    try {
      if (this.phase === 'responding') {
        this.report('failed');
        return this.fail(new ModelmuxError('upstream_unavailable', `replica ${this.replica ?? '?'} broke off its answer`));
      }
      if (this.phase !== 'upstream') return this.endTry();
      if (this.abandoning !== undefined) return this.retry(this.abandoning);
      const refused = /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH/.test(reason);
      this.tryFailed(new ModelmuxError('upstream_unavailable', `replica ${this.replica ?? '?'} failed: ${reason}`), refused ? 'refused' : 'failed');
    } catch (err) {
      this.endTry();
      this.fail(err);
    }
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
      if (this.phase === 'responding') {
        this.router.metrics.timedOut('request');
        return this.fail(new ModelmuxError('timeout', `replica ${this.replica ?? '?'} did not finish its answer in time`));
      }
      if (this.phase !== 'upstream') return;
      this.router.metrics.timedOut(this.deadlineAt < this.requestDeadline ? 'upstream' : 'request');
      this.fail(new ModelmuxError('timeout', `replica ${this.replica ?? '?'} did not answer in time`));
    } catch (err) {
      this.fail(err);
    }
  }

  private readonly onAnswerClosed = (): void => {
    if (this.phase === 'responding') this.fail(new ModelmuxError('client_closed', 'the client went away during the answer'));
  };

  /** The client cancelled the call, or its deadline passed: no work for nobody. */
  private readonly onCancelled = (why: CancelReason): void => {
    if (this.phase === 'done') return;
    this.fail(
      why === 'deadline' ? new ModelmuxError('timeout', "the call's deadline passed before its answer") : new ModelmuxError('client_closed', 'the client cancelled the call before its answer'),
    );
  };

  /** Answers the router's own error with its gRPC status and code trailer (ending an answer under way so), stops any wait or try. */
  protected fail(err: unknown, code?: GrpcStatus): void {
    if (this.phase === 'done') return;
    const was = this.markDone();
    const e = toModelmuxError(err);
    this.error = e.code;
    this.httpStatus = e.status;
    const upstream = this.upstream;
    this.endTry();
    upstream?.cancel();
    this.grpcCode = code ?? grpcStatus(e.code);
    if (e.code === 'internal') this.router.log.error('request failed', { requestId: this.requestId, code: e.code, reason: e.message });
    const own: OutgoingHttpHeaders = { [HEADER_REQUEST_ID]: this.requestId, ...errorHeaders(e) };
    if (this.routed !== undefined) own[HEADER_BACKEND] = this.routed.backend;
    try {
      if (was === 'responding') this.call.end(responseFields({ ...own, 'grpc-status': String(this.grpcCode), 'grpc-message': encodeURI(e.message) }));
      else this.call.failWithHeaders(this.grpcCode, e.message, own);
    } catch (again) {
      // The last guard: the call is answered whatever broke, never left to its deadline.
      this.router.log.error('unhandled gRPC call error', { requestId: this.requestId, reason: again instanceof Error ? again.message : String(again) });
      this.call.failWithHeaders(GrpcStatus.INTERNAL, 'unexpected router error', {});
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
    GrpcCallMetrics.for(router.metrics).answered(route, this.method, GrpcStatus[this.grpcCode] ?? String(this.grpcCode), ms / 1000);
    if (this.routed !== undefined) ModelRouteMetrics.for(router.metrics).answered(this.routed.route, this.routed.backend, this.httpStatus);
    router.access.request({
      requestId: this.requestId,
      method: 'GRPC',
      path: METHOD_PATHS[this.method],
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
