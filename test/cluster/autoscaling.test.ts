import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import type { V1Pod, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import { DELETION_COST_ANNOTATION } from '../../common/names.js';
import { startControlPlane, type ControlPlane } from '../helpers/control-plane.js';
import { eventually } from '../helpers/eventually.js';
import { startKeda, type Keda } from '../helpers/keda.js';
import { getItems, getJson } from '../helpers/kube-json.js';
import { helmPath } from '../helpers/kube-tools.js';
import { startLoad, type LoadGenerator, type LoadTally } from '../helpers/load-generator.js';
import { parsePrometheus } from '../helpers/modelmux-process.js';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent.js';
import { startOperator, type OperatorProcess } from '../helpers/operator-process.js';
import type { PodMonitor } from '../helpers/pod-monitor-scrape.js';
import { startPrometheus, type PrometheusServer } from '../helpers/prometheus.js';
import { startRouter, type RouterProcess } from '../helpers/router-process.js';
import { startS3Server, type S3Server } from '../helpers/s3-server.js';
import { expectClose, expected, post, v2Body, v2Outputs, wineRows } from '../integration/replica/wine-fixtures.js';

// Autoscaling as a user runs it: Prometheus scrapes the replica pods through the chart's own
// PodMonitor (the pods handed to it by the harness: Debian's Prometheus has no Kubernetes
// discovery), KEDA's ScaledObject (the documented one, docs/autoscaling.md) makes an HPA whose
// External metric KEDA's metrics API server serves through the API server's aggregation layer,
// and the kube-controller-manager's HPA controller scales the MultiplexedDeployment through its
// /scale subresource. Load goes through a router with kube discovery, and every request of both
// moves is counted. Then KEDA takes the pool to zero and back to one on refused requests.

jest.setTimeout(300_000);
const run = promisify(execFile);

const MAX_REPLICAS = 4;
// Eight models, two slots per replica: only the fourth replica gives every model a home.
const MODELS = Array.from({ length: 8 }, (_, i) => `wine-${i}`);
const MODELS_PER_REPLICA = 2;
// Closed-loop clients. Each model turns dynamic batching on (its config.json) and each request
// waits out the pool's 100 ms batch window (twelve clients cannot fill a batch of 16), so nearly
// all of a request's time is spent in flight at a replica, whatever the CPU: HEAVY keeps about
// 11 in flight, over five times the per-replica target of 2, so the HPA asks for more than
// MAX_REPLICAS even if a loaded machine halves that; LIGHT keeps at most one in flight, so it
// asks for the minimum. HEAVY stays under the replica's maxOngoingRequests (16), so one replica
// alone never refuses a request.
const HEAVY_CLIENTS = 12;
const LIGHT_CLIENTS = 1;
const TARGET_PER_REPLICA = 2;

const mxdManifest = (s3: S3Server): string => `apiVersion: modelmux.io/v1alpha1
kind: MultiplexedDeployment
metadata: { name: wine, namespace: default }
spec:
  replicas: 1
  routePrefix: /wine
  modelSource: { uri: "s3://${s3.bucket}/wine", endpoint: "${s3.endpoint}", credentialsSecret: s3-creds }
  maxModelsPerReplica: ${MODELS_PER_REPLICA}
  batching: { maxBatchSize: 16, batchWaitTimeoutMs: 100 }
  resources: { limits: { nvidia.com/gpu: 1 } }
`;

interface PrometheusTrigger {
  type: string;
  metadata: { serverAddress: string; query: string; threshold: string; activationThreshold?: string };
}

interface ScaledObject {
  spec: {
    minReplicaCount: number;
    maxReplicaCount: number;
    pollingInterval?: number;
    cooldownPeriod?: number;
    advanced: { horizontalPodAutoscalerConfig: { behavior: { scaleDown: { stabilizationWindowSeconds: number; policies?: unknown } } } };
    triggers: PrometheusTrigger[];
  };
}

/**
 * The documented example (examples/wine-keda-scaledobject.yaml, shown in docs/autoscaling.md),
 * its queries as are; only what belongs to this cluster and this test's clock changes: the
 * Prometheus address, the bounds, the in-flight threshold, a 2 s poll and a 10 s scale-down
 * window. `fromZero`: minReplicaCount 0 and a 5 s cooldown before going to zero; the example's
 * second trigger, the routers' held requests, then wakes the pool.
 */
async function scaledObject(prometheusUrl: string, fromZero = false): Promise<string> {
  const so = parse(await readFile('examples/wine-keda-scaledobject.yaml', 'utf8')) as ScaledObject;
  const [trigger, wake] = so.spec.triggers;
  if (so.spec.triggers.length !== 2 || trigger?.type !== 'prometheus' || wake?.type !== 'prometheus' || !wake.metadata.query.includes('modelmux_router_held_requests')) {
    throw new Error('the example has changed: two prometheus triggers expected, in-flight requests then held requests');
  }
  for (const t of so.spec.triggers) t.metadata.serverAddress = prometheusUrl;
  trigger.metadata.threshold = String(TARGET_PER_REPLICA);
  so.spec.minReplicaCount = fromZero ? 0 : 1;
  so.spec.maxReplicaCount = MAX_REPLICAS;
  so.spec.pollingInterval = 2;
  so.spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown = { stabilizationWindowSeconds: 10, policies: [{ type: 'Percent', value: 100, periodSeconds: 5 }] };
  if (fromZero) so.spec.cooldownPeriod = 5;
  return stringify(so);
}

interface Mxd {
  spec: { replicas: number };
  status?: { replicas?: number; readyReplicas?: number };
}

const isReady = (p: V1Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

async function livePods(cp: ControlPlane): Promise<V1Pod[]> {
  return (await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine'])).filter((p) => p.metadata?.deletionTimestamp === undefined);
}

/** Requests a replica has answered, read from its own /metrics. */
async function answered(pod: V1Pod): Promise<number> {
  const res = await fetch(`http://${pod.status?.podIP ?? ''}:8080/metrics`);
  return parsePrometheus(await res.text()).get('modelmux_replica_requests_total') ?? 0;
}

/** The chart's PodMonitor, rendered by helm with a 1 s interval (a values knob users have too). */
async function chartPodMonitor(): Promise<PodMonitor> {
  const { stdout } = await run(await helmPath(), [
    'template', 'modelmux', 'helm/modelmux', '--namespace', 'modelmux',
    '--set', 'metrics.podMonitor.enabled=true', '--set', 'metrics.podMonitor.interval=1s',
    '--show-only', 'templates/podmonitor.yaml',
  ]);
  return parse(stdout) as PodMonitor;
}

describe('autoscaling with KEDA and Prometheus, end to end', () => {
  let cp: ControlPlane;
  let s3: S3Server;
  let agent: NodeAgent;
  let operator: OperatorProcess;
  let prometheus: PrometheusServer;
  let keda: Keda;
  let router: RouterProcess;
  let load: LoadGenerator | undefined;

  const hpa = (): Promise<V2HorizontalPodAutoscaler | undefined> => getJson<V2HorizontalPodAutoscaler>(cp, ['hpa', 'keda-hpa-wine']);
  const diagnose = async (): Promise<string> =>
    [
      `hpa: ${JSON.stringify((await hpa())?.status)}`,
      `mxd: ${JSON.stringify(await getJson<Mxd>(cp, ['mxd', 'wine']))}`,
      `prometheus: ${JSON.stringify(await prometheus.query('modelmux_replica_ongoing_requests').catch((e: unknown) => String(e)))}`,
      (await keda.logs()).slice(-3000),
    ].join('\n');

  beforeAll(async () => {
    [cp, s3] = await Promise.all([startControlPlane(), startS3Server({ bucket: 'models' })]);
    await run(process.execPath, [join(process.cwd(), 'dist/cli/main.js'), 'models', '--out', `s3://${s3.bucket}/wine`, '--count', String(MODELS.length), '--s3-endpoint', s3.endpoint], {
      env: { ...process.env, ...s3.awsEnv },
    });
    for (const m of MODELS) await s3.put(`wine/${m}/config.json`, new TextEncoder().encode(JSON.stringify({ dynamicBatching: {} })));
    await cp.kubectl(['apply', '-f', 'crds/']);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
    await cp.kubectl(['create', 'secret', 'generic', 's3-creds', `--from-literal=AWS_ACCESS_KEY_ID=${s3.accessKeyId}`, `--from-literal=AWS_SECRET_ACCESS_KEY=${s3.secretAccessKey}`]);
    // One GPU per replica, and as many GPUs as the pool may grow to.
    agent = await startNodeAgent(cp, { capacity: { gpus: MAX_REPLICAS } });
    operator = await startOperator(cp.kubeconfigPath);
    router = await startRouter(['--discovery', 'kube'], { KUBECONFIG: cp.kubeconfigPath });
    prometheus = await startPrometheus(cp, await chartPodMonitor(), { staticJobs: { 'modelmux-router': `127.0.0.1:${router.port}` } });
    keda = await startKeda(cp);
  }, 300_000);

  afterAll(async () => {
    await load?.stop();
    await router?.stop();
    await keda?.stop();
    await operator?.stop();
    await agent?.stop();
    await prometheus?.stop();
    await Promise.all([cp?.stop(), s3?.stop()]);
  }, 60_000);

  it('scales up under load: the HPA KEDA made grows the pool through /scale, the new replicas take traffic, no request fails', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: mxdManifest(s3) });
    await eventually(async () => {
      const pods = (await livePods(cp)).filter(isReady);
      if (pods.length !== 1) throw new Error(`${pods.length} ready pods`);
    }, 120_000, 500);
    await cp.kubectl(['apply', '-f', '-'], { input: await scaledObject(prometheus.url) });
    // KEDA's HPA reads its External metric through the aggregation layer: wait until it has one.
    const made = await eventually(async () => {
      const h = await hpa();
      if (h?.status?.currentMetrics?.[0]?.external?.current.averageValue === undefined) throw new Error(`hpa ${JSON.stringify(h?.status)}\n${await diagnose()}`);
      return h;
    }, 90_000, 1000);
    expect(made.spec?.scaleTargetRef).toEqual({ apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: 'wine' });
    expect(made.spec?.maxReplicas).toBe(MAX_REPLICAS);
    const metricName = made.spec?.metrics?.[0]?.external?.metric.name ?? '';

    load = startLoad({ url: `${router.url}/wine`, models: MODELS });
    load.setClients(HEAVY_CLIENTS);
    const startedAt = Date.now();
    // The metric as the HPA controller reads it: from KEDA's adapter, through the API server.
    const external = await eventually(async () => {
      const raw = await cp.kubectl(['get', '--raw', `/apis/external.metrics.k8s.io/v1beta1/namespaces/default/${metricName}?labelSelector=scaledobject.keda.sh%2Fname%3Dwine`]);
      const items = (JSON.parse(raw) as { items: { value: string }[] }).items;
      const value = Number.parseFloat(items[0]?.value ?? '0') / (items[0]?.value.endsWith('m') ? 1000 : 1);
      if (!(value > TARGET_PER_REPLICA)) throw new Error(`external metric ${raw}`);
      return value;
    }, 60_000, 1000);

    const grown = await eventually(async () => {
      const pods = (await livePods(cp)).filter(isReady);
      const m = await getJson<Mxd>(cp, ['mxd', 'wine']);
      if (m?.spec.replicas !== MAX_REPLICAS || pods.length !== MAX_REPLICAS) throw new Error(`spec.replicas ${m?.spec.replicas}, ${pods.length} ready\n${await diagnose()}`);
      return pods;
    }, 150_000, 1000);
    const scaledUpAfterMs = Date.now() - startedAt;

    // Every replica, the three new ones included, answers requests from the router.
    const before = await Promise.all(grown.map(answered));
    await new Promise((r) => setTimeout(r, 8000));
    const after = await Promise.all(grown.map(answered));
    const upTally = load.mark();
    process.stdout.write(`scale-up: external metric ${external}, ${MAX_REPLICAS} ready after ${scaledUpAfterMs} ms; requests ${JSON.stringify(upTally)}; per replica in 8 s ${JSON.stringify(after.map((a, i) => a - (before[i] ?? 0)))}\n`);
    for (const [i, a] of after.entries()) expect(a).toBeGreaterThan(before[i] ?? 0);
    const desired = (await hpa())?.status?.desiredReplicas;
    expect(desired).toBe(MAX_REPLICAS);
    expect(upTally.ok).toBeGreaterThan(0);
    expect(upTally).toEqual({ ok: upTally.ok, failed: 0, causes: {} });
  });

  it('scales down to one replica when the load falls, with requests still flowing and none failing', async () => {
    if (!load) throw new Error('the scale-up test did not start the load');
    const costs = new Map((await livePods(cp)).map((p) => [p.metadata?.name ?? '', Number(p.metadata?.annotations?.[DELETION_COST_ANNOTATION] ?? '0')]));
    load.setClients(LIGHT_CLIENTS);
    load.mark();
    const startedAt = Date.now();
    await eventually(async () => {
      const m = await getJson<Mxd>(cp, ['mxd', 'wine']);
      const pods = await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine']);
      if (m?.spec.replicas !== 1 || pods.length !== 1 || agent.pods().length !== 1) {
        throw new Error(`spec.replicas ${m?.spec.replicas}, ${pods.length} pods, ${agent.pods().length} running\n${await diagnose()}`);
      }
    }, 120_000, 1000);
    const scaledDownAfterMs = Date.now() - startedAt;
    // A few more seconds on the one replica left: the router has let go of the removed ones.
    await new Promise((r) => setTimeout(r, 3000));
    const downTally: LoadTally = await load.stop();
    load = undefined;
    const survivor = (await livePods(cp))[0]?.metadata?.name ?? '';
    const retries = (await router.metrics()).get('modelmux_router_retries_total') ?? 0;
    process.stdout.write(`scale-down: 1 replica after ${scaledDownAfterMs} ms; requests ${JSON.stringify(downTally)}; deletion costs at the start ${JSON.stringify([...costs])}, left ${survivor}; router retries over the whole test ${retries}\n`);
    expect((await hpa())?.status?.desiredReplicas).toBe(1);
    // Scale-down removed the coldest replicas (pod-deletion-cost): the hottest one is left.
    const hottest = [...costs].sort(([, a], [, b]) => b - a)[0]?.[0];
    expect(survivor).toBe(hottest);
    expect(downTally.ok).toBeGreaterThan(0);
    expect(downTally).toEqual({ ok: downTally.ok, failed: 0, causes: {} });
  });

  it('takes the pool from zero to one on the requests the router holds, and answers them (scale from zero)', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: await scaledObject(prometheus.url, true) });
    // No traffic: KEDA takes the pool to zero once the cooldown has passed.
    await eventually(async () => {
      const m = await getJson<Mxd>(cp, ['mxd', 'wine']);
      const pods = await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine']);
      if (m?.spec.replicas !== 0 || pods.length !== 0) throw new Error(`spec.replicas ${m?.spec.replicas}, ${pods.length} pods\n${await diagnose()}`);
    }, 90_000, 1000);

    // Three clients, each sending one request and no retry: the router holds them (the
    // default --zero-hold-ms, 30 s) while KEDA, reading the held-requests gauge through
    // Prometheus, brings a replica; they are answered once it is ready.
    const startedAt = Date.now();
    const rows = wineRows(2, 3);
    const answers = Promise.all([0, 1, 2].map(async () => {
      const a = await post(`${router.url}/wine/v2/models/wine-3/infer`, v2Body(rows));
      return { a, ms: Date.now() - startedAt };
    }));
    const held = await eventually(async () => {
      const n = (await router.metrics()).get('modelmux_router_held_requests') ?? 0;
      if (n !== 3) throw new Error(`${n} held`);
      return n;
    }, 10_000, 100);
    const done = await answers;
    const m = await getJson<Mxd>(cp, ['mxd', 'wine']);
    const statuses = done.map((d) => `${d.a.status}${d.a.status === 200 ? '' : ` ${String(d.a.body['error'])}`}`);
    process.stdout.write(`scale from zero: ${held} requests held, answered after ${done.map((d) => d.ms).join(', ')} ms (${statuses.join(', ')}), spec.replicas ${m?.spec.replicas}\n`);
    // Every request was held and answered: none refused, none retried by the client.
    expect(statuses).toEqual(['200', '200', '200']);
    for (const d of done) expectClose(v2Outputs(d.a), expected('wine-3', rows));
    expect(m?.spec.replicas).toBe(1);
    expect((await router.metrics()).get('modelmux_router_held_requests')).toBe(0);
  });
});
