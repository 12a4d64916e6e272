import { createServer, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../../common/clock.js';
import type { ModelId } from '../../common/model-id.js';
import type { ModelTable } from '../../common/model-table.js';
import { REPLICA_PORT } from '../../common/replica-env.js';
import { PublishCoalescer } from '../../replica/publication/publish-coalescer.js';
import { kubePodPatcher, tablePatch } from '../../replica/publication/table-publisher.js';

/**
 * Lightweight replicas for bench:tables: each holds a model table that churns like a replica
 * under uniform traffic (a load starts, ends a little later with the least recently used model
 * evicted) and publishes it exactly as `modelmux replica` does: the replica's PublishCoalescer,
 * tablePatch (the annotation encoding) and kubePodPatcher (a merge patch of its own pod through
 * client-node), and its table on `GET /models` at the pod's address, for routers that read
 * compact annotations. No model is run: what is measured is the control plane's side.
 */

export interface PublishersConfig {
  namespace: string;
  pods: { name: string; ip: string }[];
  /** Models each table holds. */
  models: number;
  idLength: number;
  /** Loads per second per replica once churning (each is three table changes). */
  loadsPerSecond: number;
  loadMs: number;
  publishIntervalMs: number;
}

/** Per pod: the table version at each load's end, and when (ms since the epoch). */
export type ChangeLog = Record<string, [number, number][]>;

export interface PublishersResult {
  published: number;
  failures: number;
  changes: ChangeLog;
}

/** Counters read during the run. */
export interface PublishersState {
  /** `GET /models` answers served to routers, and their bytes. */
  servedRequests: number;
  servedBytes: number;
}

class SimReplica {
  private version = 0;
  private readonly loaded: ModelId[] = [];
  private readonly loading: ModelId[] = [];
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly coalescer: PublishCoalescer;
  readonly ends: [number, number][] = [];
  published = 0;
  failures = 0;
  private firstPublished!: () => void;
  readonly ready = new Promise<void>((resolve) => (this.firstPublished = resolve));

  constructor(
    readonly pod: { name: string; ip: string },
    private readonly cfg: PublishersConfig,
  ) {
    for (let i = 0; i < cfg.models; i++) this.loaded.push(this.newId());
    const patch = kubePodPatcher(pod.name, cfg.namespace);
    this.coalescer = new PublishCoalescer({
      minIntervalMs: cfg.publishIntervalMs,
      maxBackoffMs: 30_000,
      clock: systemClock,
      schedule: (fn, ms) => {
        const t = setTimeout(fn, ms);
        return () => clearTimeout(t);
      },
      publish: async () => {
        try {
          await patch(tablePatch(this.table(), this.published));
          this.published++;
          this.firstPublished();
        } catch (err) {
          this.failures++;
          throw err;
        }
      },
    });
  }

  table(): ModelTable {
    return { version: this.version, loaded: [...this.loaded], loading: [...this.loading], capacity: this.cfg.models };
  }

  publishNow(): void {
    this.coalescer.notify();
  }

  churn(): void {
    // Poisson arrivals of loads: exponential gaps with the configured mean.
    const gap = -Math.log(1 - Math.random()) * (1000 / this.cfg.loadsPerSecond);
    this.timer = setTimeout(() => {
      this.load();
      this.churn();
    }, gap);
  }

  /** Stops loading, then publishes what is pending, as a replica does on shutdown. */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    await sleep(this.cfg.loadMs + 10);
    await this.coalescer.flush();
    this.coalescer.stop();
  }

  private newId(): ModelId {
    const head = `${this.pod.name}-${this.next++}-`;
    return head.padEnd(this.cfg.idLength, 'abcdefghijklmnopqrstuvwxyz').slice(0, Math.max(head.length, this.cfg.idLength)) as ModelId;
  }

  private load(): void {
    const id = this.newId();
    this.loading.push(id);
    this.version++;
    this.coalescer.notify();
    setTimeout(() => {
      this.loading.splice(this.loading.indexOf(id), 1);
      this.loaded.unshift(id);
      // As the replica's cache: the eviction and the insertion are a change each.
      if (this.loaded.length > this.cfg.models) {
        this.loaded.pop();
        this.version++;
      }
      this.version++;
      this.ends.push([this.version, Date.now()]);
      this.coalescer.notify();
    }, this.cfg.loadMs).unref();
  }

  serve(state: PublishersState): Promise<Server> {
    const server = createServer((req, res) => {
      if (req.url !== '/models') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.stringify(this.table());
      state.servedRequests++;
      state.servedBytes += body.length;
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(REPLICA_PORT, this.pod.ip, () => resolve(server));
    });
  }
}

/**
 * The child process's side: config in, `ready` once every table is on its pod; `state` reads
 * the counters; `stop` ends the churn and answers the results, while the tables are still
 * served to routers that fetch the last ones; `exit` closes.
 */
export async function runPublishers(send: (msg: unknown) => void, messages: AsyncIterable<{ type: string; config?: PublishersConfig }>): Promise<void> {
  let replicas: SimReplica[] = [];
  const servers: Server[] = [];
  const state: PublishersState = { servedRequests: 0, servedBytes: 0 };
  for await (const msg of messages) {
    if (msg.type === 'config' && msg.config) {
      const cfg = msg.config;
      replicas = cfg.pods.map((p) => new SimReplica(p, cfg));
      servers.push(...(await Promise.all(replicas.map((r) => r.serve(state)))));
      for (const r of replicas) r.publishNow();
      await Promise.all(replicas.map((r) => r.ready));
      send({ type: 'ready' });
    } else if (msg.type === 'start') {
      for (const r of replicas) r.churn();
    } else if (msg.type === 'state') {
      send({ type: 'state', state });
    } else if (msg.type === 'exit') {
      for (const s of servers) s.close();
      return;
    } else if (msg.type === 'stop') {
      await Promise.all(replicas.map((r) => r.stop()));
      const changes: ChangeLog = Object.fromEntries(replicas.map((r) => [r.pod.name, r.ends]));
      const result: PublishersResult = { published: replicas.reduce((a, r) => a + r.published, 0), failures: replicas.reduce((a, r) => a + r.failures, 0), changes };
      send({ type: 'result', result });
    }
  }
}
