import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startChild, type Child } from './child.js';
import { childPids } from './proc-cpu.js';
import type { LoadStats } from './load-stats.js';
import { sumMetric } from './prom-text.js';
import { poolArgs, type PoolOptions } from './pool-options.js';

/**
 * `modelmux local` (router + R replica processes) as the benchmark runs it. The replicas'
 * addresses are read from /proc (each child's MODELMUX_PORT), because local mode only prints
 * the router's: the load counters live on the replicas' /metrics.
 */
export interface ModelmuxLocal {
  /** e.g. `http://127.0.0.1:8000/wine/` (the Ray Serve request form's path). */
  url: string;
  /** The router's gRPC `host:port`, from local mode's banner. */
  grpcAddress: string | undefined;
  /** The router's admin port, e.g. `http://127.0.0.1:8002`: its /metrics. */
  adminUrl: string;
  replicaUrls: string[];
  replicaPids: number[];
  routerPid: number | undefined;
  /** Successful model loads so far across all replicas, and the time all loads took. */
  loads: () => Promise<LoadStats>;
  child: Child;
  stop: () => Promise<void>;
}

export interface ModelmuxLocalOptions extends PoolOptions {
  env?: Record<string, string>;
  routePrefix?: string;
}

async function cmdline(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
}

async function environ(pid: number): Promise<Map<string, string>> {
  const raw = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
  return new Map(
    raw
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

export async function replicaLoads(replicaUrls: readonly string[]): Promise<LoadStats> {
  const texts = await Promise.all(replicaUrls.map(async (u) => (await fetch(`${u}/metrics`)).text()));
  return {
    count: texts.reduce((sum, t) => sum + sumMetric(t, 'modelmux_replica_model_loads_total', { result: 'success' }), 0),
    // The histogram covers failed loads too; with a healthy store there are none.
    totalSeconds: texts.reduce((sum, t) => sum + sumMetric(t, 'modelmux_replica_model_load_duration_seconds_sum'), 0),
    downloads: texts.reduce((sum, t) => sum + sumMetric(t, 'modelmux_replica_model_fetches_total', { source: 'store' }), 0),
  };
}

export async function startModelmuxLocal(repoRoot: string, o: ModelmuxLocalOptions): Promise<ModelmuxLocal> {
  const routePrefix = o.routePrefix ?? '/wine';
  const args = [join(repoRoot, 'dist/cli/main.js'), 'local', '--port', String(o.port), '--grpc-port', '0', '--admin-port', '0', '--route-prefix', routePrefix, ...poolArgs(o), '--example-models', '0'];
  const child = await startChild(process.execPath, args, {
    env: { ...process.env, ...o.env },
    // The banner's route line, and its metrics line on the router's admin port after it.
    ready: /route\s+(http:\/\/\S+)[\s\S]*?metrics\s+(http:\/\/\S+)\/metrics/,
    readyTimeoutMs: 180_000,
  });
  const url = `${child.ready[1] as string}/`;
  const adminUrl = child.ready[2] as string;
  const replicaUrls: string[] = [];
  const replicaPids: number[] = [];
  let routerPid: number | undefined;
  for (const pid of await childPids(child.pid)) {
    const argv = await cmdline(pid);
    if (argv.includes('replica')) {
      const port = (await environ(pid)).get('MODELMUX_PORT');
      if (port) {
        replicaUrls.push(`http://127.0.0.1:${port}`);
        replicaPids.push(pid);
      }
    } else if (argv.includes('router')) routerPid = pid;
  }
  if (replicaUrls.length !== o.replicas) {
    await child.stop();
    throw new Error(`found ${replicaUrls.length} of ${o.replicas} replica processes under modelmux local`);
  }
  const grpcAddress = /^\s+grpc\s+(\S+)/m.exec(child.output())?.[1];
  return { url, adminUrl, grpcAddress, replicaUrls, replicaPids, routerPid, child, loads: () => replicaLoads(replicaUrls), stop: () => child.stop(30_000) };
}
