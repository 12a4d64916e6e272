import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { errors as undiciErrors, type Dispatcher } from 'undici';
import type { Clock } from '../common/clock.js';
import { ModelmuxError, toModelmuxError, type ErrorBody } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { HEADER_CACHE, HEADER_OVERLOADED, HEADER_REQUEST_ID } from '../common/names.js';
import type { Balancer, Lease } from './balancer.js';
import { endToEndHeaders } from './hop-headers.js';
import type { RouterMetrics } from './metrics.js';
import { statusClass } from './metrics.js';
import { parseRequestForm } from './request-form.js';
import type { Route, RouteTable } from './route-table.js';

export interface ProxyLimits {
  maxBodyBytes: number;
  /** Whole request, waiting for a slot included. */
  requestTimeoutMs: number;
  /** One try at one replica, up to its response headers. */
  tryTimeoutMs: number;
  /** How long a replica whose connection failed stays out of placement. */
  ejectMs: number;
}

/** A request id we pass on as given: bounded and printable, so it cannot break a log line. */
const REQUEST_ID = /^[A-Za-z0-9._:@=+-]{1,128}$/;

/** Errors that mean the request never reached a replica's application, so another may take it. */
function isConnectionFailure(err: unknown): boolean {
  if (err instanceof undiciErrors.ConnectTimeoutError || err instanceof undiciErrors.SocketError) return true;
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED'].includes(code);
}

function acquire(balancer: Balancer, model: string | undefined, exclude: ReadonlySet<string>, signal: AbortSignal): Promise<Lease> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      cancel();
      reject(new ModelmuxError('timeout', 'no replica slot freed up before the request deadline'));
    };
    const cancel = balancer.acquire(
      model,
      (r) => {
        signal.removeEventListener('abort', onAbort);
        if (r.ok) resolve(r.lease);
        else reject(r.error);
      },
      exclude,
    );
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > limit) throw new ModelmuxError('body_too_large', `the body is ${declared} bytes; the limit is ${limit}`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > limit) throw new ModelmuxError('body_too_large', `the body is larger than the limit of ${limit} bytes`);
    chunks.push(b);
  }
  return Buffer.concat(chunks);
}

/**
 * Forwards one request: route by prefix, model id from the request form, a replica from the
 * route's balancer, the body (buffered up to the limit, so a retry can resend it) to that
 * replica with the prefix stripped, the response streamed back. One retry on another replica
 * when the connection fails or the replica says it is overloaded.
 */
export class RouterProxy {
  constructor(
    private readonly routes: RouteTable,
    private readonly limits: ProxyLimits,
    private readonly metrics: RouterMetrics,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = this.clock.now();
    const given = req.headers[HEADER_REQUEST_ID];
    const requestId = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const query = q === -1 ? '' : url.slice(q);
    const slash = path.indexOf('/', 1);
    const prefix = slash === -1 ? path : path.slice(0, slash);
    const rest = slash === -1 ? '' : path.slice(slash);
    const route = this.routes.match(prefix);
    const routeLabel = route ? route.prefix : 'none';
    const access: Record<string, unknown> = { requestId, method: req.method, path, route: routeLabel };
    let status = 500;
    try {
      if (!route) throw new ModelmuxError('route_not_found', `no route serves ${prefix}`);
      const form = parseRequestForm(req.method ?? 'GET', rest, req.headers);
      access['model'] = form.model;
      access['form'] = form.form;
      const body = await readBody(req, this.limits.maxBodyBytes);
      status = await this.forward(route, form.model, req, res, `${rest === '' ? '/' : rest}${query}`, body, requestId, started, access);
    } catch (err) {
      const e = toModelmuxError(err);
      status = e.status;
      access['error'] = e.code;
      if (e.code === 'internal') this.log.error('request failed', { requestId, reason: e.message });
      if (!res.headersSent) {
        const payload: ErrorBody = { error: e.code, message: e.message, requestId };
        const headers: Record<string, string> = { 'content-type': 'application/json', [HEADER_REQUEST_ID]: requestId };
        if (e.code === 'pool_saturated' || e.code === 'no_replicas') headers['retry-after'] = '1';
        // The body may be unread (too large, refused early): close rather than drain it.
        if (e.code === 'body_too_large') headers['connection'] = 'close';
        res.writeHead(e.status, headers).end(JSON.stringify(payload));
      } else res.destroy();
    } finally {
      const ms = this.clock.now() - started;
      this.metrics.requests.inc({ route: routeLabel, code: statusClass(status) });
      this.metrics.requestDuration.observe({ route: routeLabel }, ms / 1000);
      this.log.info('request', { ...access, status, durationMs: Math.round(ms * 10) / 10 });
    }
  }

  private async forward(
    route: Route,
    model: string | undefined,
    req: IncomingMessage,
    res: ServerResponse,
    upstreamPath: string,
    body: Buffer,
    requestId: string,
    started: number,
    access: Record<string, unknown>,
  ): Promise<number> {
    // The client going away cancels the wait and the upstream try: no work for nobody.
    const gone = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    const deadline = AbortSignal.any([gone.signal, AbortSignal.timeout(Math.max(1, Math.round(this.limits.requestTimeoutMs - (this.clock.now() - started))))]);
    const headers = endToEndHeaders(req.headers, ['host', 'content-length', HEADER_REQUEST_ID]);
    headers[HEADER_REQUEST_ID] = requestId;
    const fwd = req.socket.remoteAddress;
    if (fwd) headers['x-forwarded-for'] = typeof headers['x-forwarded-for'] === 'string' ? `${headers['x-forwarded-for']}, ${fwd}` : fwd;
    const method = (req.method ?? 'GET') as Dispatcher.HttpMethod;
    const exclude = new Set<string>();
    const tries: string[] = [];
    for (let attempt = 0; ; attempt++) {
      const lease = await acquire(route.balancer, model, exclude, deadline);
      tries.push(lease.replica);
      access['replica'] = lease.replica;
      access['placement'] = lease.kind;
      access['waitedMs'] = Math.round(lease.waitedMs);
      this.metrics.placed(route.prefix, lease.kind, lease.waitedMs);
      const pool = route.pools.get(lease.replica);
      let released = false;
      const release = (): void => {
        if (!released) route.balancer.release(lease);
        released = true;
      };
      try {
        if (!pool) throw new ModelmuxError('upstream_unavailable', `replica ${lease.replica} has no connection pool`);
        const tryStart = this.clock.now();
        const perTry = AbortSignal.any([deadline, AbortSignal.timeout(this.limits.tryTimeoutMs)]);
        let up: Dispatcher.ResponseData;
        try {
          up = await pool.request({
            method,
            path: upstreamPath,
            headers: { ...headers, 'content-length': String(body.length) },
            body: method === 'GET' || method === 'HEAD' ? null : body,
            signal: perTry,
            headersTimeout: this.limits.tryTimeoutMs,
            bodyTimeout: this.limits.requestTimeoutMs,
          });
        } catch (err) {
          if (isConnectionFailure(err) && attempt === 0) {
            route.balancer.eject(lease.replica, this.limits.ejectMs);
            this.metrics.retries.inc({ route: route.prefix, reason: 'connect_error' });
            exclude.add(lease.replica);
            release();
            continue;
          }
          if (deadline.aborted || perTry.aborted) throw new ModelmuxError('timeout', `replica ${lease.replica} did not answer in time`, { cause: err });
          throw new ModelmuxError('upstream_unavailable', `replica ${lease.replica} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
        }
        this.metrics.upstreamLatency.observe({ route: route.prefix }, (this.clock.now() - tryStart) / 1000);
        if (up.statusCode === 503 && up.headers[HEADER_OVERLOADED] !== undefined && attempt === 0) {
          await up.body.dump();
          this.metrics.retries.inc({ route: route.prefix, reason: 'overloaded' });
          exclude.add(lease.replica);
          release();
          continue;
        }
        // The replica has the model now (hit) or just loaded it (miss): learn it before the
        // annotation round trip.
        if (model !== undefined && up.statusCode < 500 && up.headers[HEADER_CACHE] !== undefined) route.balancer.observe(lease.replica, model);
        const out = endToEndHeaders(up.headers as Record<string, string | string[] | undefined>);
        out[HEADER_REQUEST_ID] = requestId;
        res.writeHead(up.statusCode, out);
        access['tries'] = tries.length;
        await pipeline(up.body, res);
        return up.statusCode;
      } finally {
        release();
      }
    }
  }
}
