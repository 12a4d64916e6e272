import { ModelmuxError, toModelmuxError, type ErrorBody, type ErrorCode } from '../../common/errors.js';
import type { MirrorSpec } from '../../common/model-route.js';
import { HEADER_BACKEND, HEADER_CACHE, HEADER_OVERLOADED, HEADER_REQUEST_ID, HEADER_TABLE_VERSION } from '../../common/names.js';
import type { Lease } from '../placement/balancer.js';
import type { DownstreamRequest, DownstreamResponse } from '../http1/downstream.js';
import { errorHeaders } from '../http1/error-headers.js';
import { endToEndFields, type ScannedRequestHeaders } from '../http1/hop-headers.js';
import { fieldValue } from '../http1/http1-syntax.js';
import type { RetryReason, RouteMetrics, TimeoutPhase } from '../metrics.js';
import { DEFAULT_CUT_THROUGH_HOLD_MS, type RouterContext } from './context.js';
import type { SendOptions } from './request-sender.js';
import { ResponseBacklog } from './response-backlog.js';
import { ModelRouteMetrics } from '../routes/route-metrics.js';
import type { RequestClass } from '../routes/classify.js';
import type { RouteMirrors } from '../routes/route-mirror.js';
import { rewriteForBackend } from '../routes/route-rewrite.js';
import type { Route } from '../routes/route-table.js';
import { acceptedRequestId } from '../../common/request-id.js';
import type { RequestForm } from '../../common/request-grammar.js';
import { TryAttempts } from './try-attempts.js';
import { BodyBuffer } from './body-buffer.js';
import { POOLED_BODY_BYTES } from '../../common/buffer-pool.js';
import type { UpstreamController, UpstreamHandler } from './upstream-pool.js';

/** Socket failures before any byte of the response (UPSTREAM_CLOSED: upstream-pool.ts). */
const CONNECTION_FAILURE_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'UPSTREAM_CLOSED']);

/** Of those, the ones that mean nothing listens there: outlier detection ejects at once. */
const REFUSAL_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH']);

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Errors that mean the request got no answer from a replica's application, so another may take it. */
function isConnectionFailure(err: unknown): boolean {
  return CONNECTION_FAILURE_CODES.has(errorCode(err) ?? '');
}

/** An upstream failure for a message: its code first when it has one (ECONNRESET, HTTP_PROTOCOL_ERROR…). */
function describe(err: Error): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? `${code}: ${err.message}` : err.message;
}

/**
 * One proxied request, start to end, as a callback state machine that is also the upstream
 * handler of its tries. Its body, request, try and slow-reader deadlines are one entry in the
 * proxy's shared `Deadlines` (no timer of its own). One `close` listener per request notices a
 * client that goes away. A try without response headers yet is watched by the balancer, which
 * tells it when its replica is marked down; it is then given up and the request retried
 * elsewhere, as when it outlives its adaptive timeout (ADR 0030). The deadline the sweep checks
 * (`deadlineAt`) is, while the body comes, the earlier of the body's idle and total deadlines;
 * then the request deadline (set when the body is in), or while a try waits for its response
 * headers the earlier of that and the try's own deadline, or while a slow client holds the
 * replica's answer the earlier of that and the hold's end.
 */
export class Exchange extends TryAttempts implements UpstreamHandler {
  private requestId = '';
  private path = '/';
  private upstreamPath = '/';
  private form: RequestForm | undefined;
  private headers: string[] = [];
  /** A chunked or small body, as it comes. */
  private chunks: Buffer[] = [];
  /** A large body with a Content-Length, read into one pooled buffer as it comes (body-buffer.ts). */
  private pooled: BodyBuffer | undefined;
  /**
   * The body is still arriving: its bytes are read in whatever phase the exchange is in, since a
   * body cut through (`cutThrough`) is placed and tried before it is whole.
   */
  private bodyOpen = true;
  /** The request is placed at its head and its body sent to the replica as it arrives (ADR 0051, "Router cut-through"). */
  private cutThrough = false;
  /**
   * When a body cut through and still arriving is taken back from its replica, so that a client
   * that stalls mid-body holds a replica's slot only this long, not for the body timeouts; set at
   * its first try.
   */
  private takeBackAt = Number.POSITIVE_INFINITY;
  /**
   * An answer that came before the body was whole (a cut-through request), held until it is: the
   * client sends its whole body before it sees an answer, as when the router read the body first,
   * and the replica gets the rest of it (upstream-pool.ts).
   */
  private early: { headers: string[]; chunks: Buffer[]; bytes: number; ended: boolean } | undefined;
  private size = 0;
  private body: Buffer | null = null;
  /** Bytes of the body taken from the proxy's `ByteBudget`, given back when the request ends. */
  private budgeted = 0;
  /** When the body began (the head was read) and when its last bytes came. */
  private bodyStart = 0;
  private bodyAt = 0;
  /** What is held of the answer for a client that reads it slowly; made at the first sign of one. */
  private backlog: ResponseBacklog | undefined;
  /** While the replica's answer is paused for a slow client: when the exchange ends (ADR 0026). */
  private holdUntil = Number.POSITIVE_INFINITY;
  private controller: UpstreamController | undefined;
  /** A try was handed to the pool and has not ended: its end gives the slot back, not `fail`. */
  private dispatched = false;
  /** The replica refused (503 overloaded) or a gateway failed: its body is discarded before the retry. */
  private discarding: RetryReason | undefined;
  private status = 500;
  private error: ErrorCode | undefined;
  /** The request named a split ModelRoute: its public name and the model that serves it. */
  private routed: { route: string; backend: string } | undefined;
  /** Mirrors the request is copied to once its body is in, and how to name them. */
  private mirrors: { to: readonly MirrorSpec[]; form: RequestForm; prefix: string; rest: string; query: string } | undefined;

  constructor(
    router: RouterContext,
    private readonly req: DownstreamRequest,
    private readonly res: DownstreamResponse,
    /** What the dispatcher found the request to be: plain, a split route's, or refused. */
    private readonly target: RequestClass,
    private readonly scanned: ScannedRequestHeaders,
    private readonly routeMirrors: RouteMirrors,
    private readonly options: SendOptions,
  ) {
    super(router, 'body');
  }

  start(): void {
    const { req, res, target, scanned } = this;
    res.on('close', this.onClientClose);
    const declared = Number(scanned.contentLength ?? '0');
    try {
      this.path = target.path;
      this.requestId = acceptedRequestId(scanned.requestId) ?? this.router.requestIds.next();
      if (target.route !== undefined) {
        this.route = target.route;
        this.routeMetrics = this.router.metrics.forRoute(target.route.prefix);
      }
      if (target.kind === 'refused') throw target.error;
      if (target.kind !== 'plain' && target.kind !== 'split') throw new ModelmuxError('internal', `a ${target.kind} request reached the exchange`);
      this.model = target.model;
      this.form = target.form;
      const limit = this.router.limits.maxBodyBytes;
      if (declared > limit) throw new ModelmuxError('body_too_large', `the body is ${declared} bytes; the limit is ${limit}`);
      if (declared > this.router.buffered.available) throw this.router.buffered.fullError();
      const rest = target.rest === '' ? '/' : target.rest;
      this.upstreamPath = `${rest}${target.query}`;
      const headers = scanned.forward;
      headers.push(HEADER_REQUEST_ID, this.requestId);
      const peer = req.socket.remoteAddress;
      if (peer !== undefined) headers.push('x-forwarded-for', scanned.forwardedFor === undefined ? peer : `${scanned.forwardedFor}, ${peer}`);
      else if (scanned.forwardedFor !== undefined) headers.push('x-forwarded-for', scanned.forwardedFor);
      // The router's own credential for the repository API (repository-access.ts) stops here.
      this.headers = target.kind === 'plain' && target.repository ? endToEndFields(headers, 'authorization') : headers;
      if (target.kind === 'split') this.toBackend(target);
    } catch (err) {
      this.fail(err);
      return;
    }
    const now = this.router.clock.now();
    this.bodyStart = now;
    this.bodyAt = now;
    this.deadlineAt = this.bodyDeadline;
    this.router.deadlines.add(this);
    // Gathering a large body from its pieces made a fresh buffer of megabytes per request, and
    // V8 a full collection every few (docs/adr/0051-replica-request-path.md, "The router").
    if (declared >= POOLED_BODY_BYTES) this.pooled = BodyBuffer.take(this.router.bodies, declared);
    req.on('data', this.onBodyData);
    req.on('end', this.onBodyEnd);
    if (this.pooled !== undefined && this.mayCutThrough()) this.startCutThrough(declared);
  }

  /**
   * Whether a large body may go to its replica as it arrives: every form places by its path or
   * a header, so placing never waits for the body; but mirrors are sent the whole body once it
   * is in, and a GET or HEAD sends none.
   */
  private mayCutThrough(): boolean {
    const method = this.req.method;
    return this.router.limits.bodyCutThrough !== false && this.mirrors === undefined && method !== 'GET' && method !== 'HEAD';
  }

  /**
   * Placed now; the tries send the bytes in the pooled buffer and follow the rest. The body's own
   * deadlines stand in for the request deadline until it is whole (`requestDeadline`), and a try
   * sent before then is timed from the body's end (`onBodyEnd`), so a slow uploader is never
   * taken for a slow replica.
   */
  private startCutThrough(declared: number): void {
    this.cutThrough = true;
    this.body = (this.pooled as BodyBuffer).bytes.subarray(0, declared);
    this.requestDeadline = this.deadlineAt;
    this.place();
  }

  /**
   * The model is a split ModelRoute's public name: the request goes to the backend the route
   * picked, named so in its path or model header, as the replica must see it (route-rewrite.ts),
   * and is copied to the mirrors it was sampled for once its body is in.
   */
  private toBackend(target: Extract<RequestClass, { kind: 'split' }>): void {
    this.routed = { route: target.routeName, backend: target.model };
    this.upstreamPath = `${rewriteForBackend(target.form, target.rest === '' ? '/' : target.rest, this.headers, target.model)}${target.query}`;
    if (target.mirrors.length > 0) this.mirrors = { to: target.mirrors, form: target.form, prefix: target.prefix, rest: target.rest, query: target.query };
  }

  /** Copies the request to its mirrors, the client's request already on its way (route-mirror.ts). */
  private sendMirrors(): void {
    const m = this.mirrors;
    if (m === undefined || this.routed === undefined) return;
    this.mirrors = undefined;
    for (const mirror of m.to) {
      const rawHeaders = [...this.req.rawHeaders];
      const path = rewriteForBackend(m.form, m.rest, rawHeaders, mirror.model);
      this.routeMirrors.send({
        route: this.routed.route,
        model: mirror.model,
        method: this.req.method ?? 'POST',
        url: `${m.prefix}${path}${m.query}`,
        rawHeaders,
        body: this.body,
        remoteAddress: this.req.socket.remoteAddress,
      });
    }
  }

  // --- request body -------------------------------------------------------------------------

  private readonly onBodyData = (chunk: Buffer): void => {
    if (!this.bodyOpen || this.phase === 'done') return;
    const limits = this.router.limits;
    const now = this.router.clock.now();
    this.bodyAt = now;
    const bodyDeadline = this.bodyDeadline;
    if (this.cutThrough) {
      this.requestDeadline = bodyDeadline;
      this.deadlineAt = Math.min(bodyDeadline, this.holdUntil, this.phase === 'upstream' ? this.takeBackAt : Number.POSITIVE_INFINITY);
    } else this.deadlineAt = bodyDeadline;
    this.size += chunk.length;
    if (this.size > limits.maxBodyBytes) return this.fail(new ModelmuxError('body_too_large', `the body is larger than the limit of ${limits.maxBodyBytes} bytes`));
    if (!this.router.buffered.take(chunk.length)) return this.fail(this.router.buffered.fullError());
    this.budgeted += chunk.length;
    const pooled = this.pooled;
    if (pooled === undefined) return void this.chunks.push(chunk);
    if (this.size > pooled.bytes.length) return this.fail(new ModelmuxError('invalid_request', 'the body is longer than its Content-Length'));
    pooled.append(chunk);
    this.req.release?.(chunk);
  };

  private readonly onBodyEnd = (): void => {
    if (!this.bodyOpen || this.phase === 'done') return;
    this.bodyOpen = false;
    if (this.cutThrough) return this.cutThroughEnd();
    // Mirrors copy the body as it is delivered to them, after placement, which may end the exchange.
    const held = this.pooled;
    held?.retain();
    try {
      if (held !== undefined) this.body = held.bytes.subarray(0, this.size);
      else this.body = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.size);
      this.chunks = [];
      // Like Envoy's route timeout, the request deadline starts once the request is in: the
      // body had its own.
      this.requestDeadline = this.router.clock.now() + this.router.limits.requestTimeoutMs;
      this.deadlineAt = this.requestDeadline;
      this.place();
      if (this.mirrors !== undefined) this.sendMirrors();
    } catch (err) {
      this.guard(err);
    } finally {
      held?.release();
    }
  };

  /** A body cut through is whole: the request deadline starts, and the try in flight's clocks. */
  private cutThroughEnd(): void {
    try {
      if (this.size !== (this.body as Buffer).length) throw new ModelmuxError('invalid_request', 'the body is shorter than its Content-Length');
      this.requestDeadline = this.router.clock.now() + this.router.limits.requestTimeoutMs;
      this.deadlineAt = Math.min(this.requestDeadline, this.holdUntil);
      if (this.phase === 'upstream' && this.lease !== undefined) this.timeTry(this.lease);
      else if (this.early !== undefined) this.relayEarly(this.early);
    } catch (err) {
      this.guard(err);
    }
  }

  // --- placement ----------------------------------------------------------------------------

  protected dispatch(lease: Lease): void {
    const route = this.route as Route;
    this.beginTry(lease);
    const pool = route.pools.get(lease.replica);
    if (pool === undefined) return this.fail(new ModelmuxError('upstream_unavailable', `replica ${lease.replica} has no connection pool`));
    this.phase = 'upstream';
    this.discarding = undefined;
    this.controller = undefined;
    if (this.bodyOpen) this.holdWhileBodyComes();
    else this.timeTry(lease);
    route.balancer.watch(lease, this);
    const method = this.req.method ?? 'GET';
    this.dispatched = true;
    pool.dispatch({ method, path: this.upstreamPath, headers: this.headers, body: method === 'GET' || method === 'HEAD' ? null : this.body, bodyBuffer: this.pooled }, this);
  }

  /** When the body must be whole: its total timeout from its start, or its idle timeout from its last byte. */
  private get bodyDeadline(): number {
    const limits = this.router.limits;
    return Math.min(this.bodyStart + limits.bodyTimeoutMs, this.bodyAt + limits.bodyIdleTimeoutMs);
  }

  private get holdMs(): number {
    return this.router.limits.bodyCutThroughHoldMs ?? DEFAULT_CUT_THROUGH_HOLD_MS;
  }

  /** A try sent before its body is whole holds the replica's slot from now, up to `takeBackAt`. */
  private holdWhileBodyComes(): void {
    const now = this.router.clock.now();
    this.tryStart = now;
    if (this.takeBackAt === Number.POSITIVE_INFINITY) this.takeBackAt = now + this.holdMs;
    this.deadlineAt = Math.min(this.deadlineAt, this.takeBackAt);
  }

  /**
   * The body did not come whole within the hold: the try is cut (the replica sees its request
   * end and frees its slot) and the body is read whole, as with cut-through off, before the
   * request is placed again. No fault of the replica's: nothing is reported or retried, and the
   * bytes already kept are sent again whole.
   */
  private takeBack(): void {
    this.cutThrough = false;
    (this.routeMetrics as RouteMetrics).bodyTakenBack();
    this.phase = 'body';
    // Its end (onResponseError, at once) gives the slot back.
    (this.controller as UpstreamController).abort(new ModelmuxError('timeout', `the body was not whole within ${this.holdMs} ms`));
    this.deadlineAt = this.bodyDeadline;
    this.router.deadlines.add(this);
  }

  /** The try is over (answered, failed or aborted): its slot goes back to the balancer. */
  protected endTry(): void {
    this.controller = undefined;
    this.dispatched = false;
    this.releaseLease();
  }

  /** A granted retry also drops the refused answer it discarded. */
  protected override retry(reason: RetryReason): void {
    this.discarding = undefined;
    super.retry(reason);
  }

  /** Gives up the try in flight, closing its connection; its end (onResponseError) retries. */
  protected abandon(reason: RetryReason): void {
    this.abandoning = reason;
    (this.controller as UpstreamController).abort(new ModelmuxError('timeout', `the try at replica ${this.replica ?? '?'} was given up (${reason})`));
  }

  replicaDown(): void {
    if (this.phase !== 'upstream' || this.abandoning !== undefined) return;
    try {
      if (this.mayRetry()) this.abandon('replica_down');
    } catch (err) {
      this.guard(err);
    }
  }

  // --- upstream handler ----------------------------------------------------------------------

  onRequestStart(controller: UpstreamController): void {
    // A request that was given up while queued in the pool stops as soon as it starts.
    if (this.phase !== 'upstream') return controller.abort(new ModelmuxError('timeout', 'the request was given up'));
    this.controller = controller;
  }

  onResponseStart(_controller: UpstreamController, statusCode: number, headers: string[]): void {
    if (this.phase !== 'upstream' || statusCode < 200) return;
    const balancer = (this.route as Route).balancer;
    balancer.unwatch(this.lease as Lease, this);
    this.adaptivePending = false;
    this.deadlineAt = this.requestDeadline;
    const ms = this.router.clock.now() - this.tryStart;
    (this.routeMetrics as RouteMetrics).upstreamLatency(ms / 1000);
    // 502 and 504 come from something between router and replica; the replica sends neither.
    const gateway = statusCode === 502 || statusCode === 504;
    if (gateway) this.report('failed');
    else {
      // What the adaptive try timeout learns from: answers that waited for no load.
      const warm = statusCode < 500 && !this.bodyOpen && (this.model === undefined || fieldValue(headers, HEADER_CACHE) === 'hit');
      balancer.reportTry(this.replica as string, this.model, 'answered', warm ? ms : undefined);
    }
    // A replica that is full or shutting down refused before doing any work (x-modelmux-overloaded).
    const refused = statusCode === 503 && fieldValue(headers, HEADER_OVERLOADED) !== undefined;
    if ((refused || gateway) && this.mayRetry()) {
      this.discarding = refused ? 'overloaded' : 'gateway_error';
      return;
    }
    // The replica has the model now (hit) or just loaded it (miss): learn it before the
    // annotation round trip.
    if (this.model !== undefined && statusCode < 500 && fieldValue(headers, HEADER_CACHE) !== undefined) {
      const version = Number(fieldValue(headers, HEADER_TABLE_VERSION));
      (this.route as Route).balancer.observe(this.replica as string, this.model, Number.isSafeInteger(version) ? version : undefined);
    }
    const out = endToEndFields(headers, HEADER_REQUEST_ID);
    out.push(HEADER_REQUEST_ID, this.requestId);
    if (this.routed !== undefined) out.push(HEADER_BACKEND, this.routed.backend);
    this.phase = 'responding';
    this.status = statusCode;
    if (this.bodyOpen) this.early = { headers: out, chunks: [], bytes: 0, ended: false };
    else this.res.writeHead(statusCode, out);
  }

  /**
   * A client that does not keep up gets the answer queued on its connection, counted, so that
   * the replica finishes and its slot is freed; past the bounds the replica's connection pauses
   * and the client has `slowReaderTimeoutMs` to drain it (ADR 0026).
   */
  onResponseData(controller: UpstreamController, chunk: Buffer): void {
    if (this.phase !== 'responding') return;
    if (this.early !== undefined) return this.holdEarly(controller, chunk);
    const accepted = this.res.write(chunk);
    if (accepted && this.backlog?.isBehind !== true) return;
    const backlog = (this.backlog ??= new ResponseBacklog(this.router.buffered, this.router.limits.maxResponseBufferBytes));
    const wasBehind = backlog.isBehind;
    const pause = backlog.wrote(chunk.length, accepted);
    if (!wasBehind) this.watchDrain(backlog);
    if (pause && this.holdUntil === Number.POSITIVE_INFINITY) {
      controller.pause();
      this.holdUntil = this.router.clock.now() + this.router.limits.slowReaderTimeoutMs;
      this.deadlineAt = Math.min(this.requestDeadline, this.holdUntil);
    }
  }

  /** Until the client's connection drains or closes, what the backlog counts stays held, even after the exchange. */
  private watchDrain(backlog: ResponseBacklog): void {
    const socket = this.req.socket;
    const drained = (): void => {
      socket.removeListener('drain', drained);
      socket.removeListener('close', drained);
      backlog.drained();
      if (this.holdUntil === Number.POSITIVE_INFINITY) return;
      this.holdUntil = Number.POSITIVE_INFINITY;
      if (this.phase !== 'responding') return;
      this.deadlineAt = this.requestDeadline;
      this.controller?.resume();
    };
    socket.once('drain', drained);
    socket.once('close', drained);
  }

  /** Counted in the byte budget with the body; past one answer's bound the replica's answer pauses until the body is in. */
  private holdEarly(controller: UpstreamController, chunk: Buffer): void {
    const early = this.early as NonNullable<typeof this.early>;
    if (!this.router.buffered.take(chunk.length)) return this.fail(this.router.buffered.fullError());
    this.budgeted += chunk.length;
    early.chunks.push(chunk);
    early.bytes += chunk.length;
    if (early.bytes >= this.router.limits.maxResponseBufferBytes) controller.pause();
  }

  /** The body is whole: the answer held for it goes to the client, and the rest as it comes. */
  private relayEarly(early: NonNullable<typeof this.early>): void {
    this.early = undefined;
    this.res.writeHead(this.status, early.headers);
    for (const chunk of early.chunks) this.res.write(chunk);
    if (!early.ended) return void this.controller?.resume();
    this.res.end();
    this.finish();
  }

  onResponseEnd(): void {
    this.endTry();
    try {
      if (this.phase === 'upstream' && this.discarding !== undefined) return this.retry(this.discarding);
      if (this.phase !== 'responding') return;
      if (this.early !== undefined) {
        this.early.ended = true;
        return;
      }
      this.res.end();
      this.finish();
    } catch (err) {
      this.guard(err);
    }
  }

  onResponseError(_controller: UpstreamController, err: Error): void {
    this.endTry();
    const phase = this.phase;
    // Taken back (`takeBack`): the body is read whole now, and the request placed again then.
    if (phase === 'done' || phase === 'body') return;
    const replica = this.replica as string;
    try {
      if (phase === 'upstream') {
        const granted = this.abandoning ?? this.discarding;
        if (granted !== undefined) return this.retry(granted);
        if (isConnectionFailure(err)) {
          this.report(REFUSAL_CODES.has(errorCode(err) ?? '') ? 'refused' : 'failed');
          if (this.mayRetry()) return this.retry('connect_error');
        }
        return this.fail(new ModelmuxError('upstream_unavailable', `replica ${replica} failed: ${describe(err)}`, { cause: err }));
      }
      // The response broke off while streaming: the client sees a cut connection.
      this.fail(new ModelmuxError('upstream_unavailable', `replica ${replica} broke off its response: ${describe(err)}`, { cause: err }));
    } catch (again) {
      this.guard(again);
    }
  }

  // --- endings ----------------------------------------------------------------------------------

  expire(): void {
    try {
      const limits = this.router.limits;
      const now = this.router.clock.now();
      if (this.bodyOpen && now >= this.bodyDeadline) {
        const idle = now - this.bodyAt >= limits.bodyIdleTimeoutMs;
        this.timedOut(idle ? 'body_idle' : 'body_total');
        this.fail(new ModelmuxError('request_timeout', idle ? `no byte of the body came for ${limits.bodyIdleTimeoutMs} ms` : `the body did not arrive within ${limits.bodyTimeoutMs} ms`));
      } else if (this.bodyOpen && this.cutThrough && this.phase === 'upstream' && now >= this.takeBackAt) {
        this.takeBack();
      } else if (this.phase === 'waiting') {
        this.timedOut('request');
        this.fail(new ModelmuxError('timeout', 'no replica slot freed up before the request deadline'));
      } else if (this.phase === 'upstream' && this.adaptivePending && this.tryDeadline < this.requestDeadline) {
        this.tryTimedOut();
      } else if (this.phase === 'responding' && now >= this.holdUntil) {
        this.timedOut('slow_reader');
        this.fail(new ModelmuxError('timeout', `the client took none of the answer for ${limits.slowReaderTimeoutMs} ms while replica ${this.replica ?? '?'} waited`));
      } else {
        this.timedOut(this.phase === 'upstream' && this.deadlineAt < this.requestDeadline ? 'upstream' : 'request');
        this.fail(new ModelmuxError('timeout', `replica ${this.replica ?? '?'} did not answer in time`));
      }
    } catch (err) {
      this.guard(err);
    }
  }

  private timedOut(phase: TimeoutPhase): void {
    if (this.phase !== 'done') this.router.metrics.timedOut(phase);
  }

  /** The body's bytes are no longer held for the request. */
  private releaseBody(): void {
    this.router.buffered.release(this.budgeted);
    this.budgeted = 0;
    // Tries whose write of the body is under way hold its buffer until the socket is done with it.
    const pooled = this.pooled;
    this.pooled = undefined;
    // The rest of the body will not come: a try still sending it cuts its request short.
    if (this.bodyOpen) pooled?.abandon();
    pooled?.release();
  }

  /** The client went away before its answer was complete: no work for nobody. */
  private readonly onClientClose = (): void => {
    if (this.phase === 'done' || this.res.writableFinished) return;
    try {
      this.fail(new ModelmuxError('client_closed', 'the client closed the connection before the answer'));
    } catch (err) {
      this.guard(err);
    }
  };

  /**
   * The last guard of a callback: an unexpected throw answers `internal` (or cuts the
   * response) instead of escaping into the upstream pool, the balancer's queue or the event loop.
   */
  protected guard(err: unknown): void {
    try {
      if (this.phase !== 'done') return this.fail(err);
    } catch {
      // fail itself threw: fall through and cut the connection.
    }
    this.router.log.error('unhandled request error', { requestId: this.requestId, reason: err instanceof Error ? err.message : String(err) });
    this.router.deadlines.remove(this);
    this.releaseBody();
    if (!this.dispatched) this.endTry();
    this.res.destroy();
  }

  /** Answers with the error (or cuts a response already under way), stops any wait or try. */
  protected fail(err: unknown): void {
    if (this.phase === 'done') return;
    const was = this.markDone();
    const e = toModelmuxError(err);
    this.error = e.code;
    if (e.code === 'buffer_full') this.router.metrics.rejected('buffered_bytes');
    // The pool then calls onResponseError, which gives the slot back.
    if (this.controller !== undefined) this.controller.abort(e);
    else if (!this.dispatched) this.endTry();
    const res = this.res;
    if (!res.headersSent && !res.destroyed) {
      this.status = e.status;
      const payload: ErrorBody = { error: e.code, message: e.message, requestId: this.requestId };
      const headers = ['content-type', 'application/json', HEADER_REQUEST_ID, this.requestId];
      if (this.routed !== undefined) headers.push(HEADER_BACKEND, this.routed.backend);
      headers.push(...errorHeaders(e.code));
      res.writeHead(e.status, headers).end(JSON.stringify(payload));
    } else {
      if (!res.headersSent) this.status = e.status;
      res.destroy();
    }
    if (e.code === 'internal' || was === 'responding') this.router.log.error('request failed', { requestId: this.requestId, code: e.code, reason: e.message });
    this.finish();
  }

  private finish(): void {
    this.phase = 'done';
    this.router.deadlines.remove(this);
    this.releaseBody();
    const ms = this.router.clock.now() - this.started;
    if (this.routeMetrics !== undefined) this.routeMetrics.answered(this.status, ms / 1000);
    else this.router.metrics.forRoute('none').answered(this.status, ms / 1000);
    if (this.routed !== undefined && this.options.mirror !== true) ModelRouteMetrics.for(this.router.metrics).answered(this.routed.route, this.routed.backend, this.status);
    this.router.access.request({
      requestId: this.requestId,
      method: this.req.method ?? 'GET',
      path: this.path,
      route: this.route === undefined ? 'none' : this.route.prefix,
      model: this.model,
      form: this.form,
      replica: this.replica,
      placement: this.placement,
      waitedMs: this.waitedMs,
      tries: this.tries === 0 ? undefined : this.tries,
      error: this.error,
      status: this.status,
      durationMs: ms,
    });
  }
}
