import { fork, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { parse as parseYaml } from 'yaml';
import { intString, type OptionSpecs } from '../common/config.js';
import { CRD_FILE } from '../common/crd.js';
import { API_GROUP, API_VERSION, KIND, LABEL_DEPLOYMENT, MODELS_ANNOTATION } from '../common/names.js';
import { parseTableAnnotation } from '../common/table-annotation.js';
import { eventually } from '../harness/eventually.js';
import { slotList } from './lib/comma-list.js';
import { startCountingRelay, type CountingRelay } from './lib/counting-relay.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { startBenchControlPlane, type BenchControlPlane } from './lib/kube-control-plane.js';
import { fmt } from './lib/markdown.js';
import { cpuSeconds } from './lib/proc-cpu.js';
import { sumMetric } from './lib/prom-text.js';
import { writeReport, type BenchReport } from './lib/report.js';
import { summarize, type LatencySummary } from './lib/stats.js';
import { propagation } from './lib/table-propagation.js';
import { runPublishers, type ChangeLog, type PublishersConfig, type PublishersResult, type PublishersState } from './lib/table-publishers.js';
import { runWatcher, type WatcherResult } from './lib/table-watcher.js';

/**
 * `npm run bench:tables`: what replicas' model tables cost the control plane, against the pool
 * size. Per size, a fresh etcd and kube-apiserver (the test control plane's binaries, started
 * by bench/lib/kube-control-plane.ts), N pods whose tables churn and are published by
 * lightweight replicas (bench/lib/table-publishers.ts: the replica's own coalescer, annotation
 * encoding and pod patcher, no models run), and two routers' discovery in processes of their own
 * (bench/lib/table-watcher.ts: the router's KubeDiscovery and RouteTable), each behind a relay
 * that counts its bytes. Measured over `--seconds` of churn: pod patches per second at the API
 * server, etcd writes and database growth, watch bytes per router per second, each router's
 * CPU, and the time from a load finishing to both routers' balancers holding a table that has it.
 * Writes bench/results/tables.{json,md}.
 */

const ROUTE = '/bench';
const DEPLOYMENT = 'bench';

const schema = z.object({
  sizes: slotList('10,50,100,200'),
  models: intString(1, 10_000).default(50),
  idLength: intString(8, 200).default(40),
  loadsPerSecond: z.coerce.number().positive().max(1000).default(5),
  publishIntervalMs: intString(0, 60_000).default(1000),
  warmupSeconds: z.coerce.number().min(0).max(600).default(5),
  seconds: z.coerce.number().min(1).max(3600).default(20),
  publisherProcesses: intString(1, 16).default(4),
  role: z.enum(['publishers', 'watcher']).optional(),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  sizes: { flag: 'sizes', help: 'Comma list of pool sizes (replica pods) to measure, each on a fresh control plane (default 10,50,100,200).' },
  models: { flag: 'models', help: "Models in each replica's table (default 50; past about 190 of 40 characters the annotation is compact and routers fetch GET /models)." },
  idLength: { flag: 'id-length', help: 'Characters per model id (default 40).' },
  loadsPerSecond: { flag: 'loads-per-second', help: 'Loads per second per replica while churning, each three table changes (default 5).' },
  publishIntervalMs: { flag: 'publish-interval-ms', help: "The replicas' --publish-interval-ms (default 1000, the replica's default)." },
  warmupSeconds: { flag: 'warmup-seconds', help: 'Seconds of churn before measuring (default 5).' },
  seconds: { flag: 'seconds', help: 'Measured seconds of churn per size (default 20).' },
  publisherProcesses: { flag: 'publisher-processes', help: 'Processes the lightweight replicas are spread over (default 4).' },
  role: { flag: 'role', help: 'Internal: run as a publishers or watcher child process.' },
};

interface Row {
  replicas: number;
  seconds: number;
  /** Pod PATCH requests the API server answered, per second. */
  patchesPerSecond: number;
  /** Their mean duration at the API server (its own histogram), ms. */
  patchMeanMs: number;
  /** Table changes the replicas made per second (each load is three). */
  changesPerSecond: number;
  etcdPutsPerSecond: number;
  /** Growth of etcd's database file over the window, bytes per second (before compaction, every 5 min). */
  etcdGrowthBytesPerSecond: number;
  etcdSizeBytes: number;
  /** CPU of the API server and of etcd, in cores. */
  apiServerCores: number;
  etcdCores: number;
  /** Bytes the API server sent each router (watch and lists), per second: the mean of the two. */
  watchBytesPerRouterPerSecond: number;
  /** Bytes of `GET /models` each router read from the replicas per second (compact tables), the mean of the two. */
  fetchBytesPerRouterPerSecond: number;
  /** Each router's CPU in cores over the window, the mean of the two. */
  routerCores: number;
  /** TCP connections the lightweight replicas opened to the API server, per second. */
  publisherConnectionsPerSecond: number;
  /** Mean pod object size as JSON. */
  podBytes: number;
  annotationBytes: number;
  annotationForm: string;
  /** Load end → both routers' balancers have a table of that version or newer. */
  propagation: LatencySummary;
  /** Loads of the window that some router never saw (a later change overtook nothing: should be 0). */
  unseen: number;
}

type Msg = { type: string; [k: string]: unknown };

/** Messages from the parent, as an async iterable (a child's side). */
async function* parentMessages(): AsyncGenerator<Msg> {
  const queue: Msg[] = [];
  let wake: (() => void) | undefined;
  process.on('message', (m: Msg) => {
    queue.push(m);
    wake?.();
  });
  for (;;) {
    const m = queue.shift();
    if (m !== undefined) yield m;
    else await new Promise<void>((resolve) => (wake = resolve));
  }
}

/** A forked child of this script in a role, with request/response over IPC. */
class RoleChild {
  private readonly waiting: ((m: Msg) => void)[] = [];
  private readonly exited: Promise<void>;
  constructor(
    readonly proc: ChildProcess,
    readonly name: string,
  ) {
    proc.on('message', (m: Msg) => this.waiting.shift()?.(m));
    this.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    void this.exited.then(() => {
      for (const w of this.waiting.splice(0)) w({ type: 'exited' });
    });
  }

  static start(role: 'publishers' | 'watcher', env: Record<string, string>, name: string): RoleChild {
    const proc = fork(fileURLToPath(import.meta.url), ['--role', role], { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    return new RoleChild(proc, name);
  }

  ask(msg: Msg, timeoutMs = 120_000): Promise<Msg> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.name}: no answer to ${msg.type} in ${timeoutMs} ms`)), timeoutMs);
      this.waiting.push((m) => {
        clearTimeout(t);
        if (m.type === 'exited') reject(new Error(`${this.name} exited`));
        else resolve(m);
      });
      this.proc.send(msg);
    });
  }

  tell(msg: Msg): void {
    this.proc.send(msg);
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGTERM');
    await this.exited;
  }
}

/** Pod addresses on loopback, away from the test tier's 127.0.0.10–254. */
const podIp = (i: number): string => `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`;

/** The CRD, the resource and N pods, Running and Ready at their loopback addresses. */
async function setUpPool(cp: BenchControlPlane, n: number, o: Options): Promise<void> {
  const crd = parseYaml(await readFile(CRD_FILE, 'utf8')) as unknown;
  await cp.send('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
  for (let i = 0; ; i++) {
    const got = JSON.parse(await cp.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/multiplexeddeployments.${API_GROUP}`)) as {
      status?: { conditions?: { type: string; status: string }[] };
    };
    if (got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
    if (i > 300) throw new Error('the CRD did not become Established');
    await sleep(100);
  }
  // The new kind is served a moment after Established.
  for (let i = 0; ; i++) {
    try {
      await cp.send('POST', `/apis/${API_GROUP}/${API_VERSION}/namespaces/default/multiplexeddeployments`, {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: KIND,
        metadata: { name: DEPLOYMENT, namespace: 'default' },
        spec: { routePrefix: ROUTE, modelSource: { uri: 'file:///models' }, maxModelsPerReplica: o.models },
      });
      break;
    } catch (err) {
      if (i > 100) throw err;
      await sleep(200);
    }
  }
  for (let i = 0; i < n; i++) {
    const name = `${DEPLOYMENT}-${i}`;
    await cp.send('POST', '/api/v1/namespaces/default/pods', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'default', labels: { [LABEL_DEPLOYMENT]: DEPLOYMENT } },
      spec: { schedulerName: 'nobody', containers: [{ name: 'replica', image: 'modelmux:bench' }] },
    });
    const ip = podIp(i);
    await cp.send(
      'PATCH',
      `/api/v1/namespaces/default/pods/${name}/status`,
      { status: { phase: 'Running', podIP: ip, podIPs: [{ ip }], conditions: [{ type: 'Ready', status: 'True' }] } },
      'application/merge-patch+json',
    );
  }
}

interface Snapshot {
  at: number;
  patches: number;
  patchSeconds: number;
  etcdPuts: number;
  etcdSize: number;
  apiCpu: number;
  etcdCpu: number;
  relayBytes: number[];
  routerCpu: number[];
  publisherConnections: number;
  servedBytes: number;
}

async function snapshot(cp: BenchControlPlane, relays: readonly CountingRelay[], publisherRelay: CountingRelay, watchers: readonly RoleChild[], publishers: readonly RoleChild[]): Promise<Snapshot> {
  const [api, etcd, states, served, apiCpu, etcdCpu] = await Promise.all([
    cp.apiMetrics(),
    cp.etcdMetrics(),
    Promise.all(watchers.map((w) => w.ask({ type: 'state' }))),
    Promise.all(publishers.map((p) => p.ask({ type: 'state' }))),
    cpuSeconds(cp.apiServerPid),
    cpuSeconds(cp.etcdPid),
  ]);
  return {
    at: Date.now(),
    patches: sumMetric(api, 'apiserver_request_total', { verb: 'PATCH', resource: 'pods' }),
    patchSeconds: sumMetric(api, 'apiserver_request_duration_seconds_sum', { verb: 'PATCH', resource: 'pods' }),
    etcdPuts: sumMetric(etcd, 'etcd_mvcc_put_total'),
    etcdSize: sumMetric(etcd, 'etcd_mvcc_db_total_size_in_bytes'),
    apiCpu,
    etcdCpu,
    relayBytes: relays.map((r) => r.downBytes()),
    routerCpu: states.map((s) => Number(s['cpuSeconds'])),
    publisherConnections: publisherRelay.connections(),
    servedBytes: served.reduce((acc, m) => acc + (m['state'] as PublishersState).servedBytes, 0),
  };
}

async function measureSize(n: number, o: Options, log: (s: string) => void): Promise<Row> {
  const cp = await startBenchControlPlane();
  const children: RoleChild[] = [];
  const relays: CountingRelay[] = [];
  try {
    await setUpPool(cp, n, o);
    const api = new URL(cp.server);
    const watchers: RoleChild[] = [];
    for (let i = 0; i < 2; i++) {
      const relay = await startCountingRelay(api.hostname, Number(api.port));
      relays.push(relay);
      const w = RoleChild.start('watcher', { KUBECONFIG: await cp.kubeconfig(`https://127.0.0.1:${relay.port}`) }, `router ${i + 1}`);
      children.push(w);
      watchers.push(w);
    }
    /** Until every watching router counts `n` in its state's `field`; fails saying what each counts. */
    const allWatchers = (field: 'replicas' | 'withTables'): Promise<void> =>
      eventually(
        async () => {
          const counts = (await Promise.all(watchers.map((w) => w.ask({ type: 'state' })))).map((s) => s[field]);
          if (!counts.every((c) => c === n)) throw new Error(`the routers' ${field}: ${counts.join(', ')} of ${n}`);
        },
        120_000,
        200,
      );
    await allWatchers('replicas');

    const perProcess = Math.ceil(n / Math.min(o.publisherProcesses, n));
    const publishers: RoleChild[] = [];
    const configs: Promise<Msg>[] = [];
    // Through a relay too, to count the connections they open.
    const publisherRelay = await startCountingRelay(api.hostname, Number(api.port));
    relays.push(publisherRelay);
    const publisherConfig = await cp.kubeconfig(`https://127.0.0.1:${publisherRelay.port}`);
    for (let first = 0; first < n; first += perProcess) {
      const p = RoleChild.start('publishers', { KUBECONFIG: publisherConfig }, `publishers ${first}`);
      children.push(p);
      publishers.push(p);
      const pods = Array.from({ length: Math.min(perProcess, n - first) }, (_, k) => ({ name: `${DEPLOYMENT}-${first + k}`, ip: podIp(first + k) }));
      const config: PublishersConfig = { namespace: 'default', pods, models: o.models, idLength: o.idLength, loadsPerSecond: o.loadsPerSecond, loadMs: 50, publishIntervalMs: o.publishIntervalMs };
      configs.push(p.ask({ type: 'config', config }, 300_000));
    }
    // Each answers `ready` once its replicas' first tables are on their pods.
    await Promise.all(configs);
    await allWatchers('withTables');
    const pod = await cp.get(`/api/v1/namespaces/default/pods/${DEPLOYMENT}-0`);
    const annotation = (JSON.parse(pod) as { metadata?: { annotations?: Record<string, string> } }).metadata?.annotations?.[MODELS_ANNOTATION] ?? '';
    log(`${n} replicas: tables published (${parseTableAnnotation(annotation)?.form ?? 'none'} form, ${annotation.length} bytes); churning`);

    for (const p of publishers) p.tell({ type: 'start' });
    await sleep(o.warmupSeconds * 1000);
    const routerRelays = relays.slice(0, 2);
    const a = await snapshot(cp, routerRelays, publisherRelay, watchers, publishers);
    await sleep(o.seconds * 1000);
    const b = await snapshot(cp, routerRelays, publisherRelay, watchers, publishers);
    const results = (await Promise.all(publishers.map((p) => p.ask({ type: 'stop' })))).map((m) => m['result'] as PublishersResult);
    // The last publications reach the routers within an interval and a watch round trip.
    await sleep(o.publishIntervalMs + 3000);
    const podBytesAll = (JSON.parse(await cp.get('/api/v1/namespaces/default/pods')) as { items: unknown[] }).items.map((p) => JSON.stringify(p).length);
    const seen = (await Promise.all(watchers.map((w) => w.ask({ type: 'stop' })))).map((m) => (m['result'] as WatcherResult).seen);
    for (const p of publishers) p.tell({ type: 'exit' });
    const changes: ChangeLog = Object.assign({}, ...results.map((r) => r.changes)) as ChangeLog;
    const s = (b.at - a.at) / 1000;
    const prop = propagation(changes, seen, a.at, b.at);
    const loadsInWindow = Object.values(changes).reduce((acc, ends) => acc + ends.filter(([, at]) => at >= a.at && at <= b.at).length, 0);
    const mean = (xs: readonly number[]): number => xs.reduce((x, y) => x + y, 0) / Math.max(1, xs.length);
    return {
      replicas: n,
      seconds: s,
      patchesPerSecond: (b.patches - a.patches) / s,
      patchMeanMs: ((b.patchSeconds - a.patchSeconds) * 1000) / Math.max(1, b.patches - a.patches),
      changesPerSecond: (loadsInWindow * 3) / s,
      etcdPutsPerSecond: (b.etcdPuts - a.etcdPuts) / s,
      etcdGrowthBytesPerSecond: (b.etcdSize - a.etcdSize) / s,
      etcdSizeBytes: b.etcdSize,
      apiServerCores: (b.apiCpu - a.apiCpu) / s,
      etcdCores: (b.etcdCpu - a.etcdCpu) / s,
      watchBytesPerRouterPerSecond: mean(b.relayBytes.map((x, i) => (x - (a.relayBytes[i] ?? 0)) / s)),
      fetchBytesPerRouterPerSecond: (b.servedBytes - a.servedBytes) / s / watchers.length,
      routerCores: mean(b.routerCpu.map((x, i) => (x - (a.routerCpu[i] ?? 0)) / s)),
      publisherConnectionsPerSecond: (b.publisherConnections - a.publisherConnections) / s,
      podBytes: mean(podBytesAll),
      annotationBytes: annotation.length,
      annotationForm: parseTableAnnotation(annotation)?.form ?? 'none',
      propagation: summarize(prop.samples),
      unseen: prop.unseen,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await Promise.all(relays.map((r) => r.close()));
    await cp.stop();
  }
}

function report(rows: readonly Row[], o: Options): BenchReport {
  const table = {
    header: [
      'replicas',
      'pod patches/s',
      'PATCH mean ms',
      'new connections/s',
      'etcd writes/s',
      'etcd growth KB/s',
      'API server + etcd cores',
      'watch KB/s per router',
      'GET /models KB/s per router',
      'router CPU (cores)',
      'change → both routers p50 / p99 / max ms',
      'unseen',
    ],
    rows: rows.map((r) => [
      String(r.replicas),
      fmt(r.patchesPerSecond, 1),
      fmt(r.patchMeanMs, 1),
      fmt(r.publisherConnectionsPerSecond, 1),
      fmt(r.etcdPutsPerSecond, 1),
      fmt(r.etcdGrowthBytesPerSecond / 1024, 1),
      `${fmt(r.apiServerCores, 2)} + ${fmt(r.etcdCores, 2)}`,
      fmt(r.watchBytesPerRouterPerSecond / 1024, 1),
      fmt(r.fetchBytesPerRouterPerSecond / 1024, 1),
      fmt(r.routerCores, 3),
      `${fmt(r.propagation.p50Ms, 0)} / ${fmt(r.propagation.p99Ms, 0)} / ${fmt(r.propagation.maxMs, 0)}`,
      String(r.unseen),
    ]),
  };
  const first = rows[0];
  return {
    title: 'Model tables at scale',
    setup:
      `Each replica holds ${o.models} models of ${o.idLength}-character ids and loads ${o.loadsPerSecond} a second (${o.loadsPerSecond * 3} table changes a second), publishing at most every ${o.publishIntervalMs} ms; ` +
      `${first ? `annotation ${first.annotationForm}, ${first.annotationBytes} bytes, pod object ${Math.round(first.podBytes)} bytes` : ''}. ` +
      `Lightweight replicas (the replica's coalescer, encoding and patcher; no models) in ${o.publisherProcesses} processes at most, two routers' discovery (KubeDiscovery and RouteTable) in a process each. ` +
      `${o.seconds} s measured after ${o.warmupSeconds} s of churn, per size on a fresh etcd and kube-apiserver.`,
    sections: [
      {
        headline: true,
        table,
        after: `"change → both routers": from a load's end in a lightweight replica to the moment both routers' balancers hold a table of that version or newer. etcd growth is of its database file before compaction (the API server compacts every 5 minutes).`,
      },
    ],
    data: { rows },
  };
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  if (o.role === 'publishers') return runPublishers((m) => process.send?.(m), parentMessages() as AsyncIterable<{ type: string; config?: PublishersConfig }>).then(() => process.exit(0));
  if (o.role === 'watcher') return runWatcher(ROUTE, (m) => process.send?.(m), parentMessages()).then(() => process.exit(0));
  const rows: Row[] = [];
  for (const n of o.sizes) {
    rows.push(await measureSize(n, o, (s) => process.stderr.write(`${s}\n`)));
    const r = rows.at(-1) as Row;
    process.stderr.write(
      `${n} replicas: ${fmt(r.patchesPerSecond)} patches/s, watch ${fmt(r.watchBytesPerRouterPerSecond / 1024)} KB/s per router, router ${fmt(r.routerCores, 3)} cores, p99 ${fmt(r.propagation.p99Ms, 0)} ms\n`,
    );
  }
  await writeReport(run, report(rows, o));
}

await runBench({ name: 'tables', summary: 'Measure what model tables cost the control plane against the pool size.', schema, specs }, main);
