import { readFile } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { parse, stringify } from 'yaml';
import { MAX_REPLICAS, TARGET_PER_REPLICA, waitForReadyPods, waitForZero, wineManifest } from '../../harness/autoscaling-pool.js';
import { eventually } from '../../harness/eventually.js';
import { startKeda } from '../../harness/keda.js';
import { autoscalingSuite, expectScaledDown, expectScaledUp, expectWokenFromZero } from '../helpers/autoscaling-pool.js';

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
  const suite = autoscalingSuite('keda-hpa-wine', (cluster) => startKeda(cluster.cp));
  const { hpa, diagnose } = suite;

  it('scales up under load: the HPA KEDA made grows the pool through /scale, the new replicas take traffic, no request fails', async () => {
    const { cp, s3, prometheus } = suite.cluster;
    await cp.kubectl(['apply', '-f', '-'], { input: wineManifest(s3) });
    await waitForReadyPods(cp, 1, 120_000, diagnose);
    await cp.kubectl(['apply', '-f', '-'], { input: await scaledObject(prometheus.url) });
    // KEDA's HPA reads its External metric through the aggregation layer: wait until it has one.
    const made = await eventually(
      async () => {
        const h = await hpa();
        if (h?.status?.currentMetrics?.[0]?.external?.current.averageValue === undefined) throw new Error(`hpa ${JSON.stringify(h?.status)}\n${await diagnose()}`);
        return h;
      },
      90_000,
      1000,
    );
    expect(made.spec?.scaleTargetRef).toEqual({ apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: 'wine' });
    expect(made.spec?.maxReplicas).toBe(MAX_REPLICAS);
    const metricName = made.spec?.metrics?.[0]?.external?.metric.name ?? '';

    // The metric as the HPA controller reads it: from KEDA's adapter, through the API server.
    const up = await suite.grow(`/apis/external.metrics.k8s.io/v1beta1/namespaces/default/${metricName}?labelSelector=scaledobject.keda.sh%2Fname%3Dwine`);
    // Every replica, the three new ones included, answers requests from the router.
    await expectScaledUp(up, hpa, 'external metric');
  });

  it('scales down to one replica when the load falls, with requests still flowing and none failing', async () => {
    const down = await suite.shrink();
    const retries = (await suite.cluster.router.metrics()).get('modelmux_router_retries_total') ?? 0;
    // Scale-down removed the coldest replicas (pod-deletion-cost): the hottest one is left.
    await expectScaledDown(down, hpa, `; router retries over the whole test ${retries}`);
  });

  it('takes the pool from zero to one on the requests the router holds, and answers them (scale from zero)', async () => {
    const { cluster } = suite;
    const { cp } = cluster;
    await cp.kubectl(['apply', '-f', '-'], { input: await scaledObject(cluster.prometheus.url, true) });
    // No traffic: KEDA takes the pool to zero once the cooldown has passed.
    await waitForZero(cp, diagnose);

    // Three clients, each sending one request and no retry: the router holds them (the
    // default --zero-hold-ms, 30 s) while KEDA, reading the held-requests gauge through
    // Prometheus, brings a replica; they are answered once it is ready.
    // Every request was held and answered: none refused, none retried by the client.
    await expectWokenFromZero(cluster, 3);
  });
});
