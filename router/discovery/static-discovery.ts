import type { Logger } from '../../common/log.js';
import type { Discovery, ReplicaEndpoint, RouteState } from './discovery.js';
import { readModelTable } from './table-reader.js';

export interface StaticRoute {
  prefix: string;
  urls: string[];
  /** Replica URL → `host:port` of its gRPC service, when some URL names one. */
  grpc?: Map<string, string>;
}

/** The query parameter of a replica URL that names its gRPC port: `http://127.0.0.1:8081?grpc-port=9081`. */
export const GRPC_PORT_PARAM = 'grpc-port';

/**
 * Parses `/wine=http://127.0.0.1:8081,http://127.0.0.1:8082;/beer=http://…`, the static
 * routes of local mode and tests. A URL may name the replica's gRPC port, `?grpc-port=9081`.
 */
export function parseStaticRoutes(spec: string): { routes: StaticRoute[]; problems: string[] } {
  const routes: StaticRoute[] = [];
  const problems: string[] = [];
  for (const part of spec
    .split(';')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const eq = part.indexOf('=');
    const prefix = eq === -1 ? '' : part.slice(0, eq).trim();
    if (!/^\/[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(prefix)) problems.push(`route "${part}": prefix must be one path segment such as /wine`);
    const urls: string[] = [];
    const grpc = new Map<string, string>();
    for (const u of part
      .slice(eq + 1)
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')) {
      let url: URL;
      try {
        url = new URL(u);
        if (url.protocol !== 'http:') throw new Error('not http');
      } catch {
        problems.push(`route "${prefix}": "${u}" is not an http:// URL`);
        continue;
      }
      urls.push(url.origin);
      const grpcPort = url.searchParams.get(GRPC_PORT_PARAM);
      if (grpcPort === null) continue;
      if (/^[1-9][0-9]{0,4}$/.test(grpcPort) && Number(grpcPort) <= 65535) grpc.set(url.origin, `${url.hostname}:${grpcPort}`);
      else problems.push(`route "${prefix}": "${u}": ${GRPC_PORT_PARAM} must be a port number`);
    }
    if (urls.length === 0) problems.push(`route "${prefix}" lists no replica URL`);
    routes.push(grpc.size === 0 ? { prefix, urls } : { prefix, urls, grpc });
  }
  if (routes.length === 0) problems.push('no route given');
  return { routes, problems };
}

/**
 * Polls every replica's `GET /models` table endpoint. A replica is in the route while its last
 * poll succeeded: a replica that stops answering drops out within one interval. A reply that
 * is not a valid table keeps the replica (it answered) without a table.
 */
export class StaticDiscovery implements Discovery {
  private timer: NodeJS.Timeout | undefined;
  private readonly state = new Map<string, { up: boolean; table: ReplicaEndpoint['table'] }>();
  private stopped = false;

  constructor(
    private readonly routes: readonly StaticRoute[],
    private readonly limits: { maxOngoingRequests: number; matchTimeoutMs: number },
    private readonly pollMs: number,
    private readonly log: Logger,
  ) {}

  async start(onUpdate: (routes: RouteState[]) => void): Promise<void> {
    const tick = async (): Promise<void> => {
      await this.pollAll();
      if (this.stopped) return;
      onUpdate(this.snapshot());
      this.timer = setTimeout(() => void tick(), this.pollMs);
      this.timer.unref();
    };
    await tick();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private snapshot(): RouteState[] {
    return this.routes.map((r) => ({
      prefix: r.prefix,
      ...this.limits,
      replicas: r.urls.filter((u) => this.state.get(u)?.up === true).map((u) => ({ name: u, url: u, grpc: r.grpc?.get(u), table: this.state.get(u)?.table })),
    }));
  }

  private async pollAll(): Promise<void> {
    const urls = [...new Set(this.routes.flatMap((r) => r.urls))];
    await Promise.all(urls.map((u) => this.poll(u)));
  }

  private async poll(url: string): Promise<void> {
    const before = this.state.get(url);
    try {
      this.state.set(url, { up: true, table: await readModelTable(url, { timeoutMs: 2000 }) });
      if (before?.up !== true) this.log.info('replica up', { replica: url });
    } catch (err) {
      this.state.set(url, { up: false, table: undefined });
      if (before?.up !== false) this.log.warn('replica down', { replica: url, reason: err instanceof Error ? err.message : String(err) });
    }
  }
}
