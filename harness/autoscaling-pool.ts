import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { V1Pod, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { DELETION_COST_ANNOTATION } from '../common/names.js';
import type { ControlPlane } from './control-plane.js';
import { eventually } from './eventually.js';
import { getItems, getJson } from './kube-json.js';
import { helmPath } from './kube-tools.js';
import { startLoad, type LoadGenerator, type LoadTally } from './load-generator.js';
import { parsePrometheus } from './modelmux-process.js';
import type { NodeAgent } from './node-agent.js';
import type { PodMonitor } from './pod-monitor-scrape.js';
import { startPrometheus, type PrometheusServer } from './prometheus.js';
import type { RouterProcess } from './router-process.js';
import type { S3Server } from './s3-server.js';
import { isReady, s3PoolManifest, startS3PoolCluster, uploadWineModels } from './s3-pool.js';

const run = promisify(execFile);

// What the autoscaling cluster tests (KEDA's ScaledObject, the operator's own HPA) and
// bench:autoscale share: the `wine` pool, the load that moves it, and the cluster around it.
// The tests' assertions on it are in test/helpers/autoscaling-pool.ts.

export const MAX_REPLICAS = 4;
// Eight models, two slots per replica: only the fourth replica gives every model a home.
export const MODELS = Array.from({ length: 8 }, (_, i) => `wine-${i}`);
const MODELS_PER_REPLICA = 2;
// Closed-loop clients. Each model turns dynamic batching on (its config.json) and each request
// waits out the pool's 100 ms batch window (twelve clients cannot fill a batch of 16), so nearly
// all of a request's time is spent in flight at a replica, whatever the CPU: HEAVY keeps about
// 11 in flight, over five times the per-replica target of 2, so the HPA asks for more than
// MAX_REPLICAS even if a loaded machine halves that; LIGHT keeps at most one in flight, so it
// asks for the minimum. HEAVY stays under the replica's maxOngoingRequests (16), so one replica
// alone never refuses a request.
export const HEAVY_CLIENTS = 12;
export const LIGHT_CLIENTS = 1;
export const TARGET_PER_REPLICA = 2;

/** The pool, one replica to start with; `extraSpec` is YAML appended to its spec (two-space indent). */
export const wineManifest = (s3: S3Server, extraSpec = ''): string =>
  `${s3PoolManifest(s3, { name: 'wine', replicas: 1, maxModelsPerReplica: MODELS_PER_REPLICA })}  batching: { maxBatchSize: 16, batchWaitTimeoutMs: 100 }
  resources: { limits: { nvidia.com/gpu: 1 } }
${extraSpec}`;

/**
 * `spec.autoscaling` (for wineManifest's extraSpec) on the HPA the operator makes, with a short
 * scale-down window that removes every surplus replica at once (the operator's default is 300 s
 * and one replica a minute): the tests' clock, and bench:autoscale's.
 */
export const autoscalingSpec = (o: { minReplicas: number; targetOngoingRequests: number; scaleDownWindowSeconds: number }): string => `  autoscaling:
    minReplicas: ${o.minReplicas}
    maxReplicas: ${MAX_REPLICAS}
    targetOngoingRequests: ${o.targetOngoingRequests}
    behavior:
      scaleDown:
        stabilizationWindowSeconds: ${o.scaleDownWindowSeconds}
        policies: [{ type: Percent, value: 100, periodSeconds: 5 }]
`;

export interface WineMxd {
  spec: { replicas: number };
  status?: { replicas?: number; readyReplicas?: number };
}

/** The pool's pods not being deleted. */
export async function livePods(cp: ControlPlane): Promise<V1Pod[]> {
  return (await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine'])).filter((p) => p.metadata?.deletionTimestamp === undefined);
}

/** Requests a replica has answered, read from its own /metrics. */
export async function answered(pod: V1Pod): Promise<number> {
  const res = await fetch(`http://${pod.status?.podIP ?? ''}:8080/metrics`);
  return parsePrometheus(await res.text()).get('modelmux_replica_requests_total') ?? 0;
}

/** Waits until the pool has `n` pods, all ready (and none being deleted, when `n` is smaller). */
export async function waitForReadyPods(cp: ControlPlane, n: number, timeoutMs: number, diagnose: () => Promise<string>): Promise<V1Pod[]> {
  return eventually(
    async () => {
      const pods = await livePods(cp);
      const ready = pods.filter(isReady);
      const m = await getJson<WineMxd>(cp, ['mxd', 'wine']);
      if (m?.spec.replicas !== n || ready.length !== n || pods.length !== n) throw new Error(`spec.replicas ${m?.spec.replicas}, ${pods.length} pods, ${ready.length} ready\n${await diagnose()}`);
      return ready;
    },
    timeoutMs,
    1000,
  );
}

/** The chart's PodMonitor, rendered by helm with a 1 s interval (a values knob users have too). */
async function chartPodMonitor(): Promise<PodMonitor> {
  const { stdout } = await run(await helmPath(), [
    'template',
    'modelmux',
    'helm/modelmux',
    '--namespace',
    'modelmux',
    '--set',
    'metrics.podMonitor.enabled=true',
    '--set',
    'metrics.podMonitor.interval=1s',
    '--show-only',
    'templates/podmonitor.yaml',
  ]);
  return parse(stdout) as PodMonitor;
}

export interface AutoscalingCluster {
  readonly cp: ControlPlane;
  readonly s3: S3Server;
  readonly agent: NodeAgent;
  readonly router: RouterProcess;
  /** Scrapes the replica pods through the chart's PodMonitor, and the router (job modelmux-router). */
  readonly prometheus: PrometheusServer;
  /** The HPA named `hpaName` (the autoscaler's), undefined until it exists. */
  hpa(hpaName: string): Promise<V2HorizontalPodAutoscaler | undefined>;
  /** The HPA's status, the resource and what Prometheus holds, then `autoscalerLogs`' tail: for failure messages. */
  describe(hpaName: string, autoscalerLogs: () => Promise<string>): Promise<string>;
  stop(): Promise<void>;
}

/**
 * A control plane with the CRDs, the wine models in S3 (each with dynamic batching), a node
 * agent with one GPU per replica the pool may grow to, the operator, a router with kube
 * discovery, and Prometheus scraping replicas and router. No autoscaler: the test adds its own.
 */
export async function startAutoscalingCluster(): Promise<AutoscalingCluster> {
  const pool = await startS3PoolCluster({
    capacity: { gpus: MAX_REPLICAS },
    router: true,
    fill: async (s3) => {
      await uploadWineModels(s3, 'wine', MODELS.length);
      for (const m of MODELS) await s3.put(`wine/${m}/config.json`, new TextEncoder().encode(JSON.stringify({ dynamicBatching: {} })));
    },
  });
  const { cp, router } = pool;
  let prometheus: PrometheusServer | undefined;
  const stop = async (): Promise<void> => {
    await prometheus?.stop();
    await pool.stop();
  };
  try {
    prometheus = await startPrometheus(cp, await chartPodMonitor(), { staticJobs: { 'modelmux-router': `127.0.0.1:${router.adminPort}` } });
    const scraped = prometheus;
    const hpa = (hpaName: string): Promise<V2HorizontalPodAutoscaler | undefined> => getJson<V2HorizontalPodAutoscaler>(cp, ['hpa', hpaName]);
    const describe = async (hpaName: string, autoscalerLogs: () => Promise<string>): Promise<string> =>
      [
        `hpa: ${JSON.stringify((await hpa(hpaName))?.status)}`,
        `mxd: ${JSON.stringify(await getJson<WineMxd>(cp, ['mxd', 'wine']))}`,
        `prometheus: ${JSON.stringify(await scraped.query('modelmux_replica_ongoing_requests').catch((e: unknown) => String(e)))}`,
        (await autoscalerLogs()).slice(-3000),
      ].join('\n');
    return { cp, s3: pool.s3, agent: pool.agent, router, prometheus, hpa, describe, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface ScaleUp {
  readonly load: LoadGenerator;
  /** From the load's start to MAX_REPLICAS ready replicas. */
  readonly readyAfterMs: number;
  /** Requests each replica answered over 8 s once all were ready. */
  readonly perReplica: readonly number[];
  /** Every request from the load's start to the end of those 8 s. */
  readonly tally: LoadTally;
}

/**
 * Starts HEAVY_CLIENTS through the router, waits for the pool to reach MAX_REPLICAS ready
 * replicas (whatever autoscaler the test runs) and counts what each replica answers then.
 * `whileGrowing` runs once the load has started (the test reads its metric there).
 */
export async function growUnderLoad<T>(cluster: AutoscalingCluster, diagnose: () => Promise<string>, whileGrowing: () => Promise<T>): Promise<ScaleUp & { seen: T }> {
  const load = startLoad({ url: `${cluster.router.url}/wine`, models: MODELS });
  load.setClients(HEAVY_CLIENTS);
  const startedAt = Date.now();
  try {
    const seen = await whileGrowing();
    const grown = await waitForReadyPods(cluster.cp, MAX_REPLICAS, 150_000, diagnose);
    const readyAfterMs = Date.now() - startedAt;
    const before = await Promise.all(grown.map(answered));
    await new Promise((r) => setTimeout(r, 8000));
    const after = await Promise.all(grown.map(answered));
    return { load, seen, readyAfterMs, perReplica: after.map((a, i) => a - (before[i] ?? 0)), tally: load.mark() };
  } catch (err) {
    await load.stop();
    throw err;
  }
}

export interface ScaleDown {
  /** From the load's fall to one pod left. */
  readonly afterMs: number;
  readonly tally: LoadTally;
  /** The pod left, and the one with the highest deletion cost when the load fell. */
  readonly survivor: string;
  readonly hottest: string;
  readonly costs: readonly [string, number][];
}

/** Drops the load to LIGHT_CLIENTS, waits for one pod left (and running), then stops the load. */
export async function shrinkOnLightLoad(cluster: AutoscalingCluster, load: LoadGenerator, diagnose: () => Promise<string>): Promise<ScaleDown> {
  const { cp, agent } = cluster;
  const costs = (await livePods(cp)).map((p): [string, number] => [p.metadata?.name ?? '', Number(p.metadata?.annotations?.[DELETION_COST_ANNOTATION] ?? '0')]);
  load.setClients(LIGHT_CLIENTS);
  load.mark();
  const startedAt = Date.now();
  await eventually(
    async () => {
      const m = await getJson<WineMxd>(cp, ['mxd', 'wine']);
      const pods = await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine']);
      if (m?.spec.replicas !== 1 || pods.length !== 1 || agent.pods().length !== 1) {
        throw new Error(`spec.replicas ${m?.spec.replicas}, ${pods.length} pods, ${agent.pods().length} running\n${await diagnose()}`);
      }
    },
    120_000,
    1000,
  );
  const afterMs = Date.now() - startedAt;
  // A few more seconds on the one replica left: the router has let go of the removed ones.
  await new Promise((r) => setTimeout(r, 3000));
  const tally = await load.stop();
  const survivor = (await livePods(cp))[0]?.metadata?.name ?? '';
  const hottest = [...costs].sort(([, a], [, b]) => b - a)[0]?.[0] ?? '';
  return { afterMs, tally, survivor, hottest, costs };
}

/** Waits until the autoscaler has taken the pool to zero and its pods are gone. */
export async function waitForZero(cp: ControlPlane, diagnose: () => Promise<string>): Promise<void> {
  await eventually(
    async () => {
      const m = await getJson<WineMxd>(cp, ['mxd', 'wine']);
      const pods = await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine']);
      if (m?.spec.replicas !== 0 || pods.length !== 0) throw new Error(`spec.replicas ${m?.spec.replicas}, ${pods.length} pods\n${await diagnose()}`);
    },
    90_000,
    1000,
  );
}
