import { systemClock, systemRandom } from '../../common/clock.js';
import { createLogger, stdoutSink } from '../../common/log.js';
import { systemSetTimer } from '../../router/placement/balancer.js';
import { KubeDiscovery } from '../../router/discovery/kube-discovery.js';
import { RouteTable } from '../../router/routes/route-table.js';

/**
 * One router's discovery for bench:tables, in a process of its own so its CPU is its own: the
 * router's KubeDiscovery (client-node informers, the annotation decoding, the exact-table fetches
 * of compact annotations) feeding the router's RouteTable and balancers, as `modelmux router
 * --discovery kube` wires them, without the HTTP server. It notes when each replica's table
 * version first reaches the balancer.
 */

/** Per pod: each table version first applied, and when (ms since the epoch). */
export type SeenLog = Record<string, [number, number][]>;

export interface WatcherResult {
  seen: SeenLog;
  /** Route snapshots applied. */
  updates: number;
}

export async function runWatcher(prefix: string, send: (msg: unknown) => void, messages: AsyncIterable<{ type: string }>): Promise<void> {
  const log = createLogger({ component: 'bench-watcher' }, stdoutSink, 'warn');
  const routes = new RouteTable({ recentMs: 5000, tableLagMs: 2000, maxQueue: 1024, connectionsPerReplica: 1 }, systemClock, systemRandom, systemSetTimer, log);
  const seen: SeenLog = {};
  const last = new Map<string, number>();
  let updates = 0;
  let replicas = 0;
  let withTables = 0;
  const discovery = new KubeDiscovery('default', log);
  await discovery.start((states) => {
    routes.apply(states);
    updates++;
    const now = Date.now();
    const route = states.find((s) => s.prefix === prefix);
    replicas = route?.replicas.length ?? 0;
    withTables = 0;
    for (const r of route?.replicas ?? []) {
      if (r.table === undefined) continue;
      withTables++;
      if (r.table.version <= (last.get(r.name) ?? -1)) continue;
      last.set(r.name, r.table.version);
      (seen[r.name] ??= []).push([r.table.version, now]);
    }
  });
  for await (const msg of messages) {
    if (msg.type === 'state') {
      const cpu = process.cpuUsage();
      send({ type: 'state', replicas, withTables, cpuSeconds: (cpu.user + cpu.system) / 1e6, updates });
    } else if (msg.type === 'stop') {
      discovery.stop();
      await routes.close();
      const result: WatcherResult = { seen, updates };
      send({ type: 'result', result });
      return;
    }
  }
}
