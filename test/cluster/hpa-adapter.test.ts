import { jest } from '@jest/globals';
import { autoscalingSpec, TARGET_PER_REPLICA, waitForReadyPods, waitForZero, wineManifest } from '../../harness/autoscaling-pool.js';
import { eventually } from '../../harness/eventually.js';
import { startPrometheusAdapter } from '../../harness/prometheus-adapter.js';
import { autoscalingSuite, expectScaledDown, expectScaledUp, expectWokenFromZero, quantity } from '../helpers/autoscaling-pool.js';

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
const autoscaling = (minReplicas: number): string => autoscalingSpec({ minReplicas, targetOngoingRequests: TARGET_PER_REPLICA, scaleDownWindowSeconds: 10 });

describe("the operator's HPA, with prometheus-adapter and the chart's rules, end to end", () => {
  const suite = autoscalingSuite('wine', (cluster) => startPrometheusAdapter(cluster.cp, cluster.prometheus.url));
  const { hpa, diagnose } = suite;

  it('scales up under load: the HPA the operator made grows the pool through /scale, the new replicas take traffic, no request fails', async () => {
    const { cp, s3 } = suite.cluster;
    await cp.kubectl(['apply', '-f', '-'], { input: wineManifest(s3, autoscaling(1)) });
    await waitForReadyPods(cp, 1, 120_000, diagnose);
    // The operator's HPA reads its Pods metric through the aggregation layer: wait until it has one.
    const made = await eventually(
      async () => {
        const h = await hpa();
        if (h?.status?.currentMetrics?.[0]?.pods?.current.averageValue === undefined) throw new Error(`hpa ${JSON.stringify(h?.status)}\n${await diagnose()}`);
        return h;
      },
      90_000,
      1000,
    );
    expect(made.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'MultiplexedDeployment', name: 'wine', controller: true });
    expect(made.spec?.scaleTargetRef).toEqual({ apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: 'wine' });
    expect(made.spec?.metrics).toEqual([{ type: 'Pods', pods: { metric: { name: 'modelmux_replica_ongoing_requests' }, target: { type: 'AverageValue', averageValue: String(TARGET_PER_REPLICA) } } }]);

    // The metric as the HPA controller reads it: from the adapter, through the API server, one
    // value per replica pod.
    const up = await suite.grow('/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/modelmux_replica_ongoing_requests?labelSelector=modelmux.io%2Fdeployment%3Dwine');
    await expectScaledUp(up, hpa, 'in flight');
  });

  it('scales down to one replica when the load falls, removing the coldest, with no request failing', async () => {
    await expectScaledDown(await suite.shrink(), hpa);
  });

  it('with minReplicas 0, goes to zero when idle and back to one on the requests the router holds, and answers them', async () => {
    const { cluster } = suite;
    const { cp } = cluster;
    await cp.kubectl(['apply', '-f', '-'], { input: wineManifest(cluster.s3, autoscaling(0)) });
    // The operator adds the held requests of the route as an External metric.
    const held = await eventually(
      async () => {
        const h = await hpa();
        if (h?.spec?.minReplicas !== 0 || h.spec.metrics?.length !== 2) throw new Error(`hpa ${JSON.stringify(h?.spec)}`);
        return h.spec.metrics[1];
      },
      30_000,
      500,
    );
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
    await expectWokenFromZero(cluster, 2);
  });
});
