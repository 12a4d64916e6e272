import type { KubernetesObject } from '@kubernetes/client-node';
import { eventually } from '../../../harness/eventually.js';
import { createLogger } from '../../../common/log.js';
import type { WatchedGroup } from '../../../operator/caches.js';
import type { ChangeType } from '../../../common/kube-informer.js';
import { Controller, type ControllerSpec } from '../../../operator/controller.js';
import { deploymentController } from '../../../operator/deployment-controller.js';
import { EventRecorder } from '../../../operator/events.js';
import { createOperatorMetrics, type OperatorMetrics } from '../../../operator/metrics.js';
import type { ReconcileResult } from '../../../operator/reconciler.js';
import { routeController } from '../../../operator/route-controller.js';
import { systemTimers, WorkQueue } from '../../../operator/work-queue.js';
import { autoscaledResource, storedResource } from './applied-objects.js';
import { FakeCluster } from './fake-cluster.js';

// The two controllers on one event stream (what the shared caches deliver), over the in-memory
// reader and writer of fake-cluster.ts: which events wake which controller, and that each
// works its own queue.

const NOW = new Date('2026-12-05T01:00:00Z');
const silent = createLogger({ component: 'test' }, () => undefined);
const OPTIONS = { workers: 1, resyncMs: 3_600_000 };

const route = (name: string, status?: unknown): KubernetesObject & { spec: unknown; status?: unknown } => ({
  apiVersion: 'modelmux.io/v1alpha1',
  kind: 'ModelRoute',
  metadata: { name, namespace: 'ml', uid: `uid-${name}`, generation: 1, resourceVersion: '1' },
  spec: { deploymentRef: { name: 'wine' }, split: { backends: [{ model: 'a' }] } },
  ...(status !== undefined ? { status } : {}),
});

const withStatus = <T extends KubernetesObject>(obj: T, status: unknown, resourceVersion: string): T => ({ ...obj, metadata: { ...obj.metadata, resourceVersion }, status });

interface Setup {
  cluster: FakeCluster;
  metrics: OperatorMetrics;
  /** Keys each controller reconciled, in order, as "controller:key". */
  reconciled: string[];
  deployments: Pick<Controller<string>, 'start' | 'stop'>;
  routes: Pick<Controller<string>, 'start' | 'stop'>;
  observe(group: WatchedGroup, type: ChangeType, obj: KubernetesObject): void;
}

function setup(): Setup {
  const cluster = new FakeCluster();
  const metrics = createOperatorMetrics();
  const reconciled: string[] = [];
  const counted = <K extends string>(spec: ControllerSpec<K>): ControllerSpec<K> => ({
    ...spec,
    reconcile: (key: K) => {
      reconciled.push(`${spec.name}:${key}`);
      return spec.reconcile(key);
    },
  });
  const synced = (): Promise<void> => Promise.resolve();
  const deployments = new Controller(
    counted(deploymentController({ cache: cluster, synced, writer: cluster, events: new EventRecorder(cluster, silent), options: { defaultImage: 'img' }, log: silent, now: () => NOW })),
    metrics,
    silent,
    OPTIONS,
  );
  const routes = new Controller(counted(routeController({ cache: cluster, synced, writer: cluster, now: () => NOW })), metrics, silent, OPTIONS);
  return {
    cluster,
    metrics,
    reconciled,
    deployments,
    routes,
    observe(group, type, obj) {
      deployments.observe(group, type, obj);
      routes.observe(group, type, obj);
    },
  };
}

async function reconcilesOf(metrics: OperatorMetrics, controller: string, result: string): Promise<number> {
  return (await metrics.reconciles.get()).values.find((v) => v.labels['controller'] === controller && v.labels['result'] === result)?.value ?? 0;
}

describe('the MultiplexedDeployment controller’s events', () => {
  const keysOf = deploymentController({
    cache: new FakeCluster(),
    synced: () => Promise.resolve(),
    writer: new FakeCluster(),
    events: new EventRecorder(new FakeCluster(), silent),
    options: { defaultImage: 'img' },
    log: silent,
    now: () => NOW,
  });

  it('wakes for a change of the resource’s spec or metadata, not of its status alone', () => {
    const mxd = { ...storedResource(), metadata: { ...storedResource().metadata, resourceVersion: '1' } };
    expect(keysOf.keysFor('resources', 'add', mxd)).toEqual(['ml/wine']);
    expect(keysOf.keysFor('resources', 'update', withStatus(mxd, { replicas: 3 }, '2'))).toEqual([]);
    expect(keysOf.keysFor('resources', 'update', { ...mxd, metadata: { ...mxd.metadata, labels: { team: 'ml' }, resourceVersion: '3' } })).toEqual(['ml/wine']);
    expect(keysOf.keysFor('resources', 'delete', mxd)).toEqual(['ml/wine']);
  });

  it('wakes for every change of the replica Deployment, whose status becomes the resource’s, but not for an HPA’s status', () => {
    const desired = keysOf.keysFor.bind(keysOf);
    const owner = autoscaledResource();
    const owned = (kind: string, apiVersion: string): KubernetesObject => ({
      apiVersion,
      kind,
      metadata: {
        name: 'wine',
        namespace: 'ml',
        uid: `uid-${kind}`,
        resourceVersion: '1',
        ownerReferences: [{ apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: owner.metadata.name, uid: owner.metadata.uid, controller: true }],
      },
    });
    const deployment = owned('Deployment', 'apps/v1');
    const hpa = owned('HorizontalPodAutoscaler', 'autoscaling/v2');
    expect(desired('deployments', 'add', deployment)).toEqual(['ml/wine']);
    expect(desired('deployments', 'update', withStatus(deployment, { readyReplicas: 1 }, '2'))).toEqual(['ml/wine']);
    expect(desired('owned', 'add', hpa)).toEqual(['ml/wine']);
    expect(desired('owned', 'update', withStatus(hpa, { currentReplicas: 2 }, '2'))).toEqual([]);
    expect(desired('owned', 'update', { ...hpa, metadata: { ...hpa.metadata, labels: {}, resourceVersion: '3' } })).toEqual(['ml/wine']);
    expect(desired('routes', 'add', route('r1'))).toEqual([]);
  });
});

describe('the ModelRoute controller’s events', () => {
  const keysOf = routeController({ cache: new FakeCluster(), synced: () => Promise.resolve(), writer: new FakeCluster(), now: () => NOW });

  it('wakes a namespace for a route’s spec change and for a pool appearing or going, not for a status write or a pool’s update', () => {
    const r = route('r1');
    expect(keysOf.keysFor('routes', 'add', r)).toEqual(['ml']);
    expect(keysOf.keysFor('routes', 'update', withStatus(r, { conditions: [] }, '2'))).toEqual([]);
    const moved: KubernetesObject = { ...r, spec: { deploymentRef: { name: 'beer' } }, metadata: { ...r.metadata, resourceVersion: '3' } } as KubernetesObject;
    expect(keysOf.keysFor('routes', 'update', moved)).toEqual(['ml']);
    const mxd = storedResource();
    expect(keysOf.keysFor('resources', 'add', mxd)).toEqual(['ml']);
    expect(keysOf.keysFor('resources', 'update', mxd)).toEqual([]);
    expect(keysOf.keysFor('resources', 'delete', mxd)).toEqual(['ml']);
    expect(keysOf.keysFor('deployments', 'update', mxd)).toEqual([]);
  });
});

describe('two controllers on one stream of events', () => {
  let s: Setup;
  beforeEach(() => (s = setup()));
  afterEach(async () => {
    await s.deployments.stop();
    await s.routes.stop();
  });

  it('reconciles, once it leads, every key the caches hold, events seen while standing by included', async () => {
    s.cluster.put(storedResource());
    s.cluster.put(route('r1'));
    s.observe('resources', 'add', storedResource());
    s.observe('routes', 'add', route('r1'));
    await Promise.all([s.deployments.start(), s.routes.start()]);
    await eventually(() => {
      expect(s.cluster.count('apply')).toBe(5);
      expect(s.cluster.count('patchRouteStatus')).toBe(1);
    });
    expect(s.reconciled.sort()).toEqual(['modelroute:ml', 'multiplexeddeployment:ml/wine']);
  });

  it('wakes only the route controller for a route, and only the deployment controller for the Deployment’s progress', async () => {
    s.cluster.put(storedResource());
    await Promise.all([s.deployments.start(), s.routes.start()]);
    await eventually(() => expect(s.reconciled).toEqual(['multiplexeddeployment:ml/wine']));
    s.reconciled.length = 0;
    s.cluster.put(route('r1'));
    s.observe('routes', 'add', route('r1'));
    await eventually(() => expect(s.reconciled).toEqual(['modelroute:ml']));
    s.reconciled.length = 0;
    const d = s.cluster.deployment('ml', 'wine')!;
    s.observe('deployments', 'update', withStatus(d, { readyReplicas: 1 }, '99'));
    await eventually(() => expect(s.reconciled).toEqual(['multiplexeddeployment:ml/wine']));
  });

  it('keeps writing route statuses while every MultiplexedDeployment reconcile fails and backs off', async () => {
    s.cluster.failApply = () => new Error('admission refused');
    s.cluster.put(storedResource());
    await Promise.all([s.deployments.start(), s.routes.start()]);
    await eventually(async () => expect(await reconcilesOf(s.metrics, 'multiplexeddeployment', 'error')).toBeGreaterThan(0));
    for (const name of ['r1', 'r2']) {
      s.cluster.put(route(name));
      s.observe('routes', 'add', route(name));
      await eventually(() =>
        expect(
          s.cluster
            .modelRoutes('ml')
            .find((r) => r.metadata?.name === name)
            ?.status?.conditions?.find((c) => c.type === 'Accepted')?.status,
        ).toBe('True'),
      );
    }
    expect(await reconcilesOf(s.metrics, 'modelroute', 'success')).toBe(2);
    expect(await reconcilesOf(s.metrics, 'multiplexeddeployment', 'success')).toBe(0);
  });
});

describe('a controller’s handling of reconcile results', () => {
  it('retries an error with backoff, looks again after a requeue, and leaves a terminal key until an event brings it back', async () => {
    const metrics = createOperatorMetrics();
    const script: (() => ReconcileResult)[] = [
      () => {
        throw new Error('API server away');
      },
      () => ({ requeueAfterMs: 5 }),
      () => ({ terminal: true }),
      () => ({}),
    ];
    let calls = 0;
    const spec: ControllerSpec<string> = {
      name: 'modelroute',
      keysFor: (_group, _type, obj) => [obj.metadata?.namespace ?? ''],
      allKeys: () => ['ml'],
      synced: () => Promise.resolve(),
      reconcile: () => Promise.resolve().then(script[calls++] ?? (() => ({}))),
    };
    const controller = new Controller(spec, metrics, silent, OPTIONS, () => new WorkQueue<string>(systemTimers, { baseMs: 5, maxMs: 5 }));
    try {
      await controller.start();
      await eventually(async () => expect(await reconcilesOf(metrics, 'modelroute', 'terminal')).toBe(1));
      expect([await reconcilesOf(metrics, 'modelroute', 'error'), await reconcilesOf(metrics, 'modelroute', 'requeue'), calls]).toEqual([1, 1, 3]);
      controller.observe('routes', 'update', route('r1'));
      await eventually(async () => expect(await reconcilesOf(metrics, 'modelroute', 'success')).toBe(1));
      expect(calls).toBe(4);
    } finally {
      await controller.stop();
    }
  });
});
