import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../common/log.js';
import { ClientConnections } from './client-connections.js';
import { ClientErrors } from './client-error.js';
import { deadlineResolutionMs } from '../exchange/deadlines.js';
import { listenOn } from './listen.js';
import type { DownstreamResponse } from './downstream.js';
import type { RouterMetrics } from '../metrics.js';
import type { RequestDispatcher } from '../exchange/dispatch.js';
import { REPOSITORY_OPEN } from '../routes/repository-access.js';
import { guardRequest, json, MAX_HEAD_BYTES, type OwnPath } from './server.js';

/** The admin port's default: Triton's metrics port, beside the public port's 8000 and gRPC's 8001. */
export const DEFAULT_ADMIN_PORT = 8002;

/** Connections open at once to the admin port; past it 503 `connection_limit`. Its clients are a scraper and an operator or two. */
export const ADMIN_MAX_CONNECTIONS = 64;

export interface AdminTimeouts {
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** node:http's stop for a whole request, head and body (the body's own bounds are the dispatcher's). */
  bodyTimeoutMs: number;
  writeTimeoutMs: number;
}

/** What the admin port answers from the public server: its own paths (server.ts). */
export interface OwnEndpoints {
  answerOwn(path: OwnPath, res: DownstreamResponse): void;
}

const OWN_PATHS: ReadonlySet<string> = new Set<OwnPath>(['/healthz', '/readyz', '/metrics', '/routes']);

/**
 * The router's admin port: `/healthz`, `/readyz`, `/metrics`, `/routes` and the model repository
 * API (`/<route>/v2/repository/…`) open to every caller, with the same fan-out, placement and
 * body bounds as on the public port. Nothing else is proxied here: it is not a second data plane.
 * Its protection is where it listens (a pod port no Service exposes), so it must never be reachable
 * by the clients of the public port. Rare requests: node:http reads them all (no fast path), its
 * head and whole-request timeouts and the router's connection bounds apply.
 */
export class AdminServer {
  private readonly server: Server;
  private readonly connections: ClientConnections;

  constructor(own: OwnEndpoints, dispatcher: RequestDispatcher, metrics: RouterMetrics, log: Logger, timeouts: AdminTimeouts) {
    const { headersTimeoutMs, keepAliveTimeoutMs, bodyTimeoutMs, writeTimeoutMs } = timeouts;
    const sweepMs = deadlineResolutionMs(Math.min(headersTimeoutMs, keepAliveTimeoutMs, writeTimeoutMs));
    const clientErrors = new ClientErrors();
    this.server = createServer(
      { keepAliveTimeout: keepAliveTimeoutMs, headersTimeout: headersTimeoutMs, requestTimeout: headersTimeoutMs + bodyTimeoutMs, connectionsCheckingInterval: sweepMs, maxHeaderSize: MAX_HEAD_BYTES },
      (req, res) => {
        clientErrors.track(req, res);
        try {
          const url = req.url ?? '/';
          const q = url.indexOf('?');
          const path = q === -1 ? url : url.slice(0, q);
          if (req.method === 'GET' && OWN_PATHS.has(path)) return own.answerOwn(path as OwnPath, res);
          const slash = path.indexOf('/', 1);
          if (slash !== -1 && path.startsWith('/v2/repository/', slash)) return dispatcher.handle(req, res, REPOSITORY_OPEN);
          json(res, 404, { error: 'not_found', message: `no ${req.method ?? 'GET'} ${path} on the admin port: it serves GET /healthz, /readyz, /metrics, /routes and POST /<route>/v2/repository/…` });
        } catch (err) {
          guardRequest(log, err, res);
        }
      },
    );
    this.server.on('clientError', clientErrors.onClientError);
    this.connections = new ClientConnections(
      this.server,
      { maxConnections: ADMIN_MAX_CONNECTIONS, maxConnectionsPerClient: 0, writeTimeoutMs, sweepMs },
      { refused: (reason) => metrics.rejected(reason), writeTimedOut: () => metrics.timedOut('downstream_write') },
    );
  }

  listen(port: number, host: string): Promise<AddressInfo> {
    return listenOn(this.server, port, host);
  }

  /** Stops taking connections; a repository call under way has `graceMs` to end. */
  async drain(graceMs: number): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const timer = setTimeout(() => this.server.closeAllConnections(), graceMs);
    await closed;
    clearTimeout(timer);
    this.connections.stop();
  }
}
