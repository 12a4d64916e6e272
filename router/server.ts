import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../common/log.js';
import type { RouterMetrics } from './metrics.js';
import type { RouterProxy } from './proxy.js';
import type { RouteTable } from './route-table.js';

/**
 * The router's HTTP server: its own endpoints (`/healthz`, `/readyz`, `/metrics`, `/routes`)
 * and everything else through the proxy. Route prefixes are one lowercase segment, so these
 * four names are reserved.
 */
export class RouterServer {
  private readonly server: Server;
  private draining = false;
  private discoveryReady = false;

  constructor(
    private readonly proxy: RouterProxy,
    private readonly routes: RouteTable,
    private readonly metrics: RouterMetrics,
    private readonly log: Logger,
  ) {
    this.server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0 }, (req, res) => this.dispatch(req, res));
  }

  markDiscoveryReady(): void {
    this.discoveryReady = true;
  }

  async listen(port: number, host: string): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return this.server.address() as AddressInfo;
  }

  /** Stops taking connections and waits for in-flight requests, at most `graceMs`. */
  async drain(graceMs: number): Promise<void> {
    this.draining = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    // Keep-alive connections become idle as their last response ends: close them as they do.
    const sweeper = setInterval(() => this.server.closeIdleConnections(), 100);
    this.server.closeIdleConnections();
    const timer = setTimeout(() => this.server.closeAllConnections(), graceMs);
    await closed;
    clearInterval(sweeper);
    clearTimeout(timer);
  }

  private dispatch(req: IncomingMessage, res: ServerResponse): void {
    try {
      if (this.draining) res.setHeader('connection', 'close');
      if (req.method === 'GET') {
        const url = req.url ?? '/';
        const q = url.indexOf('?');
        const path = q === -1 ? url : url.slice(0, q);
        if (path === '/healthz' || path === '/readyz' || path === '/metrics' || path === '/routes') return void this.own(path, res).catch((err: unknown) => this.guard(err, res));
      }
      this.proxy.handle(req, res);
    } catch (err) {
      this.guard(err, res);
    }
  }

  /** The proxy answers its own errors; this is the last guard so no request kills the process. */
  private guard(err: unknown, res: ServerResponse): void {
    this.log.error('unhandled request error', { reason: err instanceof Error ? err.message : String(err) });
    if (!res.headersSent) json(res, 500, { error: 'internal', message: 'unexpected router error' });
    else res.destroy();
  }

  private async own(path: string, res: ServerResponse): Promise<void> {
    if (path === '/healthz') return void json(res, 200, { status: 'ok' });
    if (path === '/readyz') {
      const ready = this.discoveryReady && !this.draining;
      return void json(res, ready ? 200 : 503, ready ? { status: 'ready' } : { error: this.draining ? 'shutting_down' : 'no_replicas', message: this.draining ? 'draining after SIGTERM' : 'discovery has not synced yet' });
    }
    if (path === '/metrics') {
      for (const r of this.routes.all()) {
        this.metrics.queueDepth.set({ route: r.prefix }, r.balancer.queueDepth);
        this.metrics.replicas.set({ route: r.prefix }, r.balancer.replicaNames().length);
      }
      const text = await this.metrics.registry.metrics();
      res.writeHead(200, { 'content-type': this.metrics.registry.contentType }).end(text);
      return;
    }
    json(res, 200, {
      routes: this.routes.all().map((r) => ({ prefix: r.prefix, replicas: r.balancer.replicaNames().map((n) => ({ name: n, inFlight: r.balancer.inFlight(n) })), queueDepth: r.balancer.queueDepth })),
    });
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
