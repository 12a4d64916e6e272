import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../common/log.js';
import { ClientConnections } from './client-connections.js';
import { ClientErrors } from './client-error.js';
import { deadlineResolutionMs } from '../exchange/deadlines.js';
import type { DownstreamRequest, DownstreamResponse } from './downstream.js';
import { FastPath } from './fast-path.js';
import { listenOn } from './listen.js';
import type { RouterMetrics } from '../metrics.js';
import type { RequestDispatcher } from '../exchange/dispatch.js';
import type { RepositoryAccess } from '../routes/repository-access.js';
import type { RouteTable } from '../routes/route-table.js';

/** How the server treats client connections (router/config.ts has the defaults and the flags). */
export interface ConnectionOptions {
  /** Plain HTTP/1.1 requests read by the router's fast path (ADR 0019), or all by node:http. */
  fastPath: boolean;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /**
   * The body's bounds where no exchange times it (exchange.ts does while it reads one): a body
   * left unread after its answer, and node:http's whole-request limit, head and body.
   */
  bodyIdleTimeoutMs: number;
  bodyTimeoutMs: number;
  writeTimeoutMs: number;
  maxConnections: number;
  maxConnectionsPerClient: number;
}

/** The largest request head either of the router's HTTP ports reads; past it 431 `headers_too_large`. */
export const MAX_HEAD_BYTES = 16 * 1024;

/** A path the router answers itself: the two health checks on both ports, the rest only on the admin port. */
export type OwnPath = '/healthz' | '/readyz' | '/metrics' | '/routes';

/**
 * The router's public HTTP server: `/healthz` and `/readyz` (load balancers probe them) and
 * everything else through the dispatcher, where the model repository API is refused unless
 * `repository` admits the caller. `/metrics`, `/routes` and the open repository API are the
 * admin port's (admin-server.ts), which answers them through `answerOwn`. Route prefixes are one
 * lowercase segment, so `healthz` and `readyz` are reserved.
 */
export class RouterServer {
  private readonly server: Server;
  private readonly fast: FastPath | undefined;
  private readonly connections: ClientConnections;
  /** The last request node:http read on each connection, to tell a head timeout from a body's. */
  private readonly nodeRequests = new WeakMap<Duplex, IncomingMessage>();
  private draining = false;
  private discoveryReady = false;

  constructor(
    private readonly dispatcher: RequestDispatcher,
    private readonly repository: RepositoryAccess,
    private readonly routes: RouteTable,
    private readonly metrics: RouterMetrics,
    private readonly log: Logger,
    options: ConnectionOptions,
  ) {
    const { keepAliveTimeoutMs, headersTimeoutMs, bodyIdleTimeoutMs, bodyTimeoutMs } = options;
    const sweepMs = deadlineResolutionMs(Math.min(headersTimeoutMs, keepAliveTimeoutMs, bodyIdleTimeoutMs, bodyTimeoutMs, options.writeTimeoutMs));
    const clientErrors = new ClientErrors();
    this.server = createServer(
      {
        keepAliveTimeout: keepAliveTimeoutMs,
        headersTimeout: headersTimeoutMs,
        // A stop for a body nobody reads any more; the exchange times the bodies it reads first.
        requestTimeout: headersTimeoutMs + bodyTimeoutMs,
        connectionsCheckingInterval: sweepMs,
        maxHeaderSize: MAX_HEAD_BYTES,
      },
      (req, res) => {
        clientErrors.track(req, res);
        this.nodeRequests.set(req.socket, req);
        this.dispatch(req, res);
      },
    );
    this.server.on('clientError', (err: Error & { code?: unknown }, socket: Duplex) => {
      if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') return;
      const last = this.nodeRequests.get(socket);
      metrics.timedOut(last !== undefined && !last.complete ? 'body_total' : 'head');
    });
    // Malformed requests get the JSON error body, not node:http's bare 400.
    this.server.on('clientError', clientErrors.onClientError);
    // node:http's keep-alive timeout; with no listener here it would close the connection itself.
    this.server.on('timeout', (socket: Socket) => {
      metrics.timedOut('keep_alive');
      socket.destroy();
    });
    // Plain requests are read by the fast path; node:http takes the connections it hands over.
    this.fast = options.fastPath
      ? new FastPath(this.server, (req, res) => this.dispatch(req, res), {
          keepAliveTimeoutMs,
          headersTimeoutMs,
          bodyIdleTimeoutMs,
          bodyTimeoutMs,
          maxHeadBytes: MAX_HEAD_BYTES,
          sweepMs,
          onTimeout: (phase) => metrics.timedOut(phase),
        })
      : undefined;
    // In front of both readers: every connection is counted and limited here first.
    this.connections = new ClientConnections(
      this.server,
      { maxConnections: options.maxConnections, maxConnectionsPerClient: options.maxConnectionsPerClient, writeTimeoutMs: options.writeTimeoutMs, sweepMs },
      { refused: (reason) => metrics.rejected(reason), writeTimedOut: () => metrics.timedOut('downstream_write') },
    );
  }

  markDiscoveryReady(): void {
    this.discoveryReady = true;
  }

  listen(port: number, host: string): Promise<AddressInfo> {
    return listenOn(this.server, port, host);
  }

  /** Stops taking connections and waits for in-flight requests, at most `graceMs`. */
  async drain(graceMs: number): Promise<void> {
    this.draining = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    // Keep-alive connections become idle as their last response ends: close them as they do.
    // The fast path closes its connections after their response from now on.
    this.fast?.drain();
    const sweeper = setInterval(() => this.server.closeIdleConnections(), 100);
    this.server.closeIdleConnections();
    const timer = setTimeout(() => {
      this.server.closeAllConnections();
      this.fast?.closeAll();
    }, graceMs);
    await closed;
    clearInterval(sweeper);
    clearTimeout(timer);
    this.connections.stop();
  }

  private dispatch(req: DownstreamRequest, res: DownstreamResponse): void {
    try {
      if (this.draining) res.setHeader('connection', 'close');
      if (req.method === 'GET') {
        const url = req.url ?? '/';
        const q = url.indexOf('?');
        const path = q === -1 ? url : url.slice(0, q);
        if (path === '/healthz' || path === '/readyz') return void this.answerOwn(path, res);
      }
      this.dispatcher.handle(req, res, this.repository);
    } catch (err) {
      guardRequest(this.log, err, res);
    }
  }

  /** Answers one of the router's own paths; never throws (a failure is answered 500). */
  answerOwn(path: OwnPath, res: DownstreamResponse): void {
    this.own(path, res).catch((err: unknown) => guardRequest(this.log, err, res));
  }

  private async own(path: OwnPath, res: DownstreamResponse): Promise<void> {
    if (path === '/healthz') return void json(res, 200, { status: 'ok' });
    if (path === '/readyz') {
      const ready = this.discoveryReady && !this.draining;
      return void json(
        res,
        ready ? 200 : 503,
        ready ? { status: 'ready' } : { error: this.draining ? 'shutting_down' : 'no_replicas', message: this.draining ? 'draining after SIGTERM' : 'discovery has not synced yet' },
      );
    }
    if (path === '/metrics') {
      for (const r of this.routes.all()) {
        this.metrics.queueDepth.set({ route: r.prefix }, r.balancer.queueDepth);
        this.metrics.heldRequests.set({ route: r.prefix }, r.balancer.heldCount);
        this.metrics.replicas.set({ route: r.prefix }, r.balancer.replicaNames().length);
      }
      this.metrics.clientConnections.set(this.connections.size);
      this.metrics.bufferedBytes.set(this.dispatcher.context.buffered.used);
      const text = await this.metrics.registry.metrics();
      res.writeHead(200, ['content-type', this.metrics.registry.contentType]).end(text);
      return;
    }
    json(res, 200, {
      routes: this.routes.all().map((r) => ({ prefix: r.prefix, replicas: r.balancer.replicaNames().map((n) => ({ name: n, inFlight: r.balancer.inFlight(n) })), queueDepth: r.balancer.queueDepth })),
    });
  }
}

/** The dispatcher answers a request's own errors; this is the last guard so no request kills the process. */
export function guardRequest(log: Logger, err: unknown, res: DownstreamResponse): void {
  log.error('unhandled request error', { reason: err instanceof Error ? err.message : String(err) });
  if (!res.headersSent) json(res, 500, { error: 'internal', message: 'unexpected router error' });
  else res.destroy();
}

export function json(res: DownstreamResponse, status: number, body: unknown): void {
  res.writeHead(status, ['content-type', 'application/json']).end(JSON.stringify(body));
}
