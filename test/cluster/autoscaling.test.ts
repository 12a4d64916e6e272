import { readFile } from 'node:fs/promises';
import { jest } from '@jest/globals';
import type { V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import {
  expectAllAnswered,
  expectNoneFailed,
  growUnderLoad,
  MAX_REPLICAS,
  sendToEmptyPool,
  shrinkOnLightLoad,
  startAutoscalingCluster,
  TARGET_PER_REPLICA,
  waitForReadyPods,
  waitForZero,
  wineManifest,
  type AutoscalingCluster,
  type WineMxd,
} from '../helpers/autoscaling-pool.js';
import type { ControlPlane } from '../helpers/control-plane.js';
import { eventually } from '../helpers/eventually.js';
import { startKeda, type Keda } from '../helpers/keda.js';
import { getJson } from '../helpers/kube-json.js';
import type { LoadGenerator } from '../helpers/load-generator.js';
import type { PrometheusServer } from '../helpers/prometheus.js';
import type { RouterProcess } from '../helpers/router-process.js';

// Autoscaling as a user runs it: Prometheus scrapes the replica pods through the chart's own
// PodMonitor (the pods handed to it by the harness: Debian's Prometheus has no Kubernetes
// discovery), KEDA's ScaledObject (the documented one, docs/autoscaling.md) makes an HPA whose
// External metric KEDA's metrics API server serves through the API server's aggregation layer,
// and the kube-controller-manager's HPA controller scales the MultiplexedDeployment through its
// /scale subresource. Load goes through a router with kube discovery, and every request of both
// moves is counted. Then KEDA takes the pool to zero and back to one on refused requests.

jest.setTimeout(300_000);

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

describe('autoscaling with KEDA and Prometheus, end to end', () => {
  let cluster: AutoscalingCluster;
  let cp: ControlPlane;
  let prometheus: PrometheusServer;
  let router: RouterProcess;
  let keda: Keda;
  let load: LoadGenerator | undefined;

  const hpa = (): Promise<V2HorizontalPodAutoscaler | undefined> => cluster.hpa('keda-hpa-wine');
  const diagnose = (): Promise<string> => cluster.describe('keda-hpa-wine', () => keda.logs());

  beforeAll(async () => {
    cluster = await startAutoscalingCluster();
    ({ cp, prometheus, router } = cluster);
    keda = await startKeda(cp);
  }, 300_000);

  afterAll(async () => {
    await load?.stop();
    await keda?.stop();
    await cluster?.stop();
  }, 60_000);

  it('scales up under load: the HPA KEDA made grows the pool through /scale, the new replicas take traffic, no request fails', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: wineManifest(cluster.s3) });
    await waitForReadyPods(cp, 1, 120_000, diagnose);
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

    // The metric as the HPA controller reads it: from KEDA's adapter, through the API server.
    const up = await growUnderLoad(cluster, diagnose, () =>
      eventually(async () => {
        const raw = await cp.kubectl(['get', '--raw', `/apis/external.metrics.k8s.io/v1beta1/namespaces/default/${metricName}?labelSelector=scaledobject.keda.sh%2Fname%3Dwine`]);
        const items = (JSON.parse(raw) as { items: { value: string }[] }).items;
        const value = Number.parseFloat(items[0]?.value ?? '0') / (items[0]?.value.endsWith('m') ? 1000 : 1);
        if (!(value > TARGET_PER_REPLICA)) throw new Error(`external metric ${raw}`);
        return value;
      }, 60_000, 1000),
    );
    load = up.load;
    process.stdout.write(`scale-up: external metric ${up.seen}, ${MAX_REPLICAS} ready after ${up.readyAfterMs} ms; requests ${JSON.stringify(up.tally)}; per replica in 8 s ${JSON.stringify(up.perReplica)}\n`);
    // Every replica, the three new ones included, answers requests from the router.
    for (const n of up.perReplica) expect(n).toBeGreaterThan(0);
    expect((await hpa())?.status?.desiredReplicas).toBe(MAX_REPLICAS);
    expectNoneFailed(up.tally);
  });

  it('scales down to one replica when the load falls, with requests still flowing and none failing', async () => {
    if (!load) throw new Error('the scale-up test did not start the load');
    const down = await shrinkOnLightLoad(cluster, load, diagnose);
    load = undefined;
    const retries = (await router.metrics()).get('modelmux_router_retries_total') ?? 0;
    process.stdout.write(`scale-down: 1 replica after ${down.afterMs} ms; requests ${JSON.stringify(down.tally)}; deletion costs at the start ${JSON.stringify(down.costs)}, left ${down.survivor}; router retries over the whole test ${retries}\n`);
    expect((await hpa())?.status?.desiredReplicas).toBe(1);
    // Scale-down removed the coldest replicas (pod-deletion-cost): the hottest one is left.
    expect(down.survivor).toBe(down.hottest);
    expectNoneFailed(down.tally);
  });

  it('takes the pool from zero to one on the requests the router holds, and answers them (scale from zero)', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: await scaledObject(prometheus.url, true) });
    // No traffic: KEDA takes the pool to zero once the cooldown has passed.
    await waitForZero(cp, diagnose);

    // Three clients, each sending one request and no retry: the router holds them (the
    // default --zero-hold-ms, 30 s) while KEDA, reading the held-requests gauge through
    // Prometheus, brings a replica; they are answered once it is ready.
    const r = await sendToEmptyPool(router, 3);
    const m = await getJson<WineMxd>(cp, ['mxd', 'wine']);
    process.stdout.write(`scale from zero: ${r.held} requests held, answered after ${r.answers.map((a) => a.ms).join(', ')} ms (${r.answers.map((a) => a.status).join(', ')}), spec.replicas ${m?.spec.replicas}\n`);
    // Every request was held and answered: none refused, none retried by the client.
    expectAllAnswered(r);
    expect(m?.spec.replicas).toBe(1);
    expect((await router.metrics()).get('modelmux_router_held_requests')).toBe(0);
  });
});
