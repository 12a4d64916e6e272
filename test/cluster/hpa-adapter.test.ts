import { jest } from '@jest/globals';
import type { V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
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
import { getJson } from '../helpers/kube-json.js';
import type { LoadGenerator } from '../helpers/load-generator.js';
import { startPrometheusAdapter, type PrometheusAdapter } from '../helpers/prometheus-adapter.js';

// The built-in path (docs/autoscaling.md): spec.autoscaling makes the operator own an HPA on the
// MultiplexedDeployment's /scale, whose Pods metric prometheus-adapter (built from the Go module
// proxy) serves from Prometheus through the aggregation layer, with the rules the chart renders.
// The kube-controller-manager's HPA controller decides; nothing else scales the pool. Then
// minReplicas 0: the operator adds the routers' held requests as an External metric (the
// chart's externalRules) and the HPA takes the pool to zero and back (the HPAScaleToZero
// feature gate, which control-plane.ts turns on).

jest.setTimeout(300_000);

/**
 * Only this test's clock differs from what a user writes: scale-down after 10 s of lower demand,
 * every surplus replica at once, instead of the operator's 300 s and one a minute.
 */
const autoscaling = (minReplicas: number): string => `  autoscaling:
    minReplicas: ${minReplicas}
    maxReplicas: ${MAX_REPLICAS}
    targetOngoingRequests: ${TARGET_PER_REPLICA}
    behavior:
      scaleDown:
        stabilizationWindowSeconds: 10
        policies: [{ type: Percent, value: 100, periodSeconds: 5 }]
`;

/** A Kubernetes quantity as a number ("2500m" is 2.5). */
const quantity = (q: string | undefined): number => (q === undefined ? NaN : q.endsWith('m') ? Number.parseFloat(q) / 1000 : Number.parseFloat(q));

describe("the operator's HPA, with prometheus-adapter and the chart's rules, end to end", () => {
  let cluster: AutoscalingCluster;
  let cp: ControlPlane;
  let adapter: PrometheusAdapter;
  let load: LoadGenerator | undefined;

  const hpa = (): Promise<V2HorizontalPodAutoscaler | undefined> => cluster.hpa('wine');
  const diagnose = (): Promise<string> => cluster.describe('wine', () => adapter.logs());

  beforeAll(async () => {
    cluster = await startAutoscalingCluster();
    cp = cluster.cp;
    adapter = await startPrometheusAdapter(cp, cluster.prometheus.url);
  }, 300_000);

  afterAll(async () => {
    await load?.stop();
    await adapter?.stop();
    await cluster?.stop();
  }, 60_000);

  it('scales up under load: the HPA the operator made grows the pool through /scale, the new replicas take traffic, no request fails', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: wineManifest(cluster.s3, autoscaling(1)) });
    await waitForReadyPods(cp, 1, 120_000, diagnose);
    // The operator's HPA reads its Pods metric through the aggregation layer: wait until it has one.
    const made = await eventually(async () => {
      const h = await hpa();
      if (h?.status?.currentMetrics?.[0]?.pods?.current.averageValue === undefined) throw new Error(`hpa ${JSON.stringify(h?.status)}\n${await diagnose()}`);
      return h;
    }, 90_000, 1000);
    expect(made.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'MultiplexedDeployment', name: 'wine', controller: true });
    expect(made.spec?.scaleTargetRef).toEqual({ apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: 'wine' });
    expect(made.spec?.metrics).toEqual([
      { type: 'Pods', pods: { metric: { name: 'modelmux_replica_ongoing_requests' }, target: { type: 'AverageValue', averageValue: String(TARGET_PER_REPLICA) } } },
    ]);

    // The metric as the HPA controller reads it: from the adapter, through the API server, one
    // value per replica pod.
    const up = await growUnderLoad(cluster, diagnose, () =>
      eventually(async () => {
        const raw = await cp.kubectl(['get', '--raw', '/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/modelmux_replica_ongoing_requests?labelSelector=modelmux.io%2Fdeployment%3Dwine']);
        const items = (JSON.parse(raw) as { items: { describedObject: { name: string }; value: string }[] }).items;
        const total = items.reduce((sum, i) => sum + quantity(i.value), 0);
        if (!(total > TARGET_PER_REPLICA)) throw new Error(`custom metric ${raw}`);
        return total;
      }, 60_000, 1000),
    );
    load = up.load;
    process.stdout.write(`scale-up: in flight ${up.seen}, ${MAX_REPLICAS} ready after ${up.readyAfterMs} ms; requests ${JSON.stringify(up.tally)}; per replica in 8 s ${JSON.stringify(up.perReplica)}\n`);
    for (const n of up.perReplica) expect(n).toBeGreaterThan(0);
    expect((await hpa())?.status?.desiredReplicas).toBe(MAX_REPLICAS);
    expectNoneFailed(up.tally);
  });

  it('scales down to one replica when the load falls, removing the coldest, with no request failing', async () => {
    if (!load) throw new Error('the scale-up test did not start the load');
    const down = await shrinkOnLightLoad(cluster, load, diagnose);
    load = undefined;
    process.stdout.write(`scale-down: 1 replica after ${down.afterMs} ms; requests ${JSON.stringify(down.tally)}; deletion costs at the start ${JSON.stringify(down.costs)}, left ${down.survivor}\n`);
    expect((await hpa())?.status?.desiredReplicas).toBe(1);
    expect(down.survivor).toBe(down.hottest);
    expectNoneFailed(down.tally);
  });

  it('with minReplicas 0, goes to zero when idle and back to one on the requests the router holds, and answers them', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: wineManifest(cluster.s3, autoscaling(0)) });
    // The operator adds the held requests of the route as an External metric.
    const held = await eventually(async () => {
      const h = await hpa();
      if (h?.spec?.minReplicas !== 0 || h.spec.metrics?.length !== 2) throw new Error(`hpa ${JSON.stringify(h?.spec)}`);
      return h.spec.metrics[1];
    }, 30_000, 500);
    expect(held).toEqual({
      type: 'External',
      external: { metric: { name: 'modelmux_router_held_requests', selector: { matchLabels: { route: 'wine' } } }, target: { type: 'AverageValue', averageValue: String(TARGET_PER_REPLICA) } },
    });
    // No traffic: no request in flight, none held; zero after the 10 s window.
    await waitForZero(cp, diagnose);
    const atZero = await cp.kubectl(['get', '--raw', '/apis/external.metrics.k8s.io/v1beta1/namespaces/default/modelmux_router_held_requests?labelSelector=route%3Dwine']);
    expect((JSON.parse(atZero) as { items: { value: string }[] }).items.map((i) => quantity(i.value))).toEqual([0]);

    // Two requests, sent once each: the router holds them (the default --zero-hold-ms, 30 s);
    // the HPA reads 2 held through the adapter, wants ⌈2 ÷ 2⌉ = 1 replica, and they are
    // answered once it is ready.
    const r = await sendToEmptyPool(cluster.router, 2);
    const m = await getJson<WineMxd>(cp, ['mxd', 'wine']);
    process.stdout.write(`scale from zero: ${r.held} requests held, answered after ${r.answers.map((a) => a.ms).join(', ')} ms (${r.answers.map((a) => a.status).join(', ')}), spec.replicas ${m?.spec.replicas}\n`);
    expectAllAnswered(r);
    expect(m?.spec.replicas).toBe(1);
    expect((await cluster.router.metrics()).get('modelmux_router_held_requests')).toBe(0);
  });
});
