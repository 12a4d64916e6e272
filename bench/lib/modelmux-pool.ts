import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPLICA_ENV } from '../../common/replica-env.js';
import { freePorts } from '../../cli/local-processes.js';
import { startChild, type Child } from './child.js';
import { waitHttpReady } from './http-ready.js';
import { replicaLoads } from './modelmux-local.js';
import type { LoadStats } from './load-stats.js';

/**
 * A modelmux pool of R replica processes and K routers (static discovery over all replicas),
 * started process by process: local mode runs one router, the scale run wants two, each
 * reading the replicas' tables on its own as two router pods do. Replicas get what local mode
 * gives them (a cache folder each and one shared folder for downloads).
 */
/** HTTP only: the gRPC services' fixed default ports would collide between processes of one machine. */
export const NO_GRPC = { [REPLICA_ENV.grpcPort]: '-1' };

export interface ModelmuxPool {
  /** One URL per router, e.g. `http://127.0.0.1:41234/scale/`. */
  routerUrls: string[];
  replicaUrls: string[];
  pids: number[];
  loads(): Promise<LoadStats>;
  stop(): Promise<void>;
}

export interface ModelmuxPoolOptions {
  replicas: number;
  routers: number;
  maxModels: number;
  maxOngoingRequests: number;
  modelSource: string;
  s3Endpoint: string;
  routePrefix: string;
  logLevel: string;
  /** S3 credentials and any other replica variable. */
  env: Record<string, string>;
}

export async function startModelmuxPool(repoRoot: string, o: ModelmuxPoolOptions): Promise<ModelmuxPool> {
  const main = join(repoRoot, 'dist/cli/main.js');
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-bench-pool-'));
  const ports = await freePorts(o.replicas + o.routers);
  const replicaUrls = ports.slice(0, o.replicas).map((p) => `http://127.0.0.1:${p}`);
  const children: Child[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(children.map((c) => c.stop(10_000)));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const [i, port] of ports.slice(0, o.replicas).entries()) {
      const env = {
        ...process.env,
        ...o.env,
        [REPLICA_ENV.host]: '127.0.0.1',
        [REPLICA_ENV.port]: String(port),
        [REPLICA_ENV.modelSource]: o.modelSource,
        [REPLICA_ENV.s3Endpoint]: o.s3Endpoint,
        [REPLICA_ENV.maxModels]: String(o.maxModels),
        [REPLICA_ENV.maxOngoingRequests]: String(o.maxOngoingRequests),
        [REPLICA_ENV.replicaName]: `replica-${i}`,
        [REPLICA_ENV.logLevel]: o.logLevel,
        ...NO_GRPC,
        [REPLICA_ENV.cacheDir]: join(dir, `replica-${i}`),
        [REPLICA_ENV.sharedCacheDir]: join(dir, 'shared'),
      };
      children.push(await startChild(process.execPath, [main, 'replica'], { env, readyTimeoutMs: 5000 }));
    }
    await Promise.all(replicaUrls.map((u, i) => waitHttpReady(`${u}/v2/health/ready`, 120_000, children[i])));
    const routes = `${o.routePrefix}=${replicaUrls.join(',')}`;
    for (const port of ports.slice(o.replicas)) {
      const args = [
        main,
        'router',
        '--discovery',
        'static',
        '--host',
        '127.0.0.1',
        '--port',
        String(port),
        '--grpc-port',
        '0',
        '--admin-port',
        '0',
        '--routes',
        routes,
        '--max-ongoing-requests',
        String(o.maxOngoingRequests),
        '--log-level',
        o.logLevel,
      ];
      const router = await startChild(process.execPath, args, { env: { ...process.env, ...NO_GRPC }, readyTimeoutMs: 5000 });
      children.push(router);
      await waitHttpReady(`http://127.0.0.1:${port}/readyz`, 120_000, router);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    routerUrls: ports.slice(o.replicas).map((p) => `http://127.0.0.1:${p}${o.routePrefix}/`),
    replicaUrls,
    pids: children.map((c) => c.pid),
    loads: () => replicaLoads(replicaUrls),
    stop,
  };
}
