import type { V1Deployment } from '@kubernetes/client-node';
import { createLogger } from '../../../common/log.js';
import type { MultiplexedDeployment, MultiplexedDeploymentSpecInput, MultiplexedDeploymentStatus } from '../../../common/resource.js';
import { ApplyRecords } from '../../../operator/apply-records.js';
import { EventRecorder } from '../../../operator/events.js';
import { reconcile, type ReconcilerDeps } from '../../../operator/reconciler.js';
import { autoscaledResource, storedResource } from './applied-objects.js';
import { FakeCluster } from './fake-cluster.js';

// reconcile() against the operator's own reader and writer interfaces over an in-memory store
// (fake-cluster.ts): its decisions — what it applies, what status it writes, requeue, retry or
// terminal — without an API server.

const NOW = new Date('2026-12-05T01:00:00Z');
const silent = createLogger({ component: 'test' }, () => undefined);

function setup(resource: MultiplexedDeployment = storedResource()): { cluster: FakeCluster; deps: ReconcilerDeps; run: () => ReturnType<typeof reconcile> } {
  const cluster = new FakeCluster();
  cluster.put(resource);
  const deps: ReconcilerDeps = {
    cache: cluster,
    writer: cluster,
    events: new EventRecorder(cluster, silent, () => NOW.getTime()),
    applied: new ApplyRecords(),
    options: { defaultImage: 'img' },
    log: silent,
    now: () => NOW,
  };
  return { cluster, deps, run: () => reconcile(deps, 'ml', 'wine') };
}

const statusOf = (cluster: FakeCluster): MultiplexedDeploymentStatus | undefined => cluster.multiplexedDeployment('ml', 'wine')?.status;
const condition = (cluster: FakeCluster, type: string) => statusOf(cluster)?.conditions?.find((c) => c.type === type);

/** The Deployment controller reports progress: a write of the Deployment's status alone. */
function rollOut(cluster: FakeCluster, ready: number, replicas = 3): void {
  const d = cluster.get('apps/v1', 'Deployment', 'ml', 'wine') as V1Deployment;
  cluster.put({ ...d, status: { observedGeneration: d.metadata?.generation ?? 0, replicas, readyReplicas: ready, updatedReplicas: replicas, availableReplicas: ready } });
}

/** A user edits the resource's spec: the API server bumps its generation. */
function editSpec(cluster: FakeCluster, spec: Partial<MultiplexedDeploymentSpecInput>): void {
  const m = cluster.multiplexedDeployment('ml', 'wine')!;
  cluster.put({ ...m, metadata: { ...m.metadata, generation: (m.metadata.generation ?? 0) + 1 }, spec: { ...m.spec, ...spec } });
}

describe('reconcile', () => {
  it('applies the five owned objects of a new resource and writes a status whose conditions carry its generation', async () => {
    const { cluster, run } = setup();
    await run();
    expect(cluster.writes.filter((w) => w.verb === 'apply').map((w) => w.kind)).toEqual(['ServiceAccount', 'Role', 'RoleBinding', 'Service', 'Deployment']);
    const status = statusOf(cluster);
    expect(status?.observedGeneration).toBe(3);
    expect(status?.conditions?.map((c) => [c.type, c.observedGeneration])).toEqual([
      ['Ready', 3],
      ['Progressing', 3],
      ['Degraded', 3],
      ['TablesBounded', 3],
    ]);
  });

  it('applies nothing when only the Deployment’s status changed, and carries the new counts into status', async () => {
    const { cluster, run } = setup();
    await run();
    const applies = cluster.count('apply');
    for (const ready of [1, 2, 3]) {
      rollOut(cluster, ready);
      await run();
      expect(statusOf(cluster)?.readyReplicas).toBe(ready);
    }
    expect(cluster.count('apply')).toBe(applies);
    expect(condition(cluster, 'Ready')?.status).toBe('True');
  });

  it('applies an object again once when the cache never showed the version it applied, then not for status changes', async () => {
    const { cluster, deps, run } = setup();
    // The Deployment's watch event has not arrived when the apply returns, and the Deployment
    // controller writes status before any reconcile sees that version.
    const owned = cluster.owned.bind(cluster);
    deps.cache = Object.assign(Object.create(cluster) as FakeCluster, { owned: (obj: Parameters<FakeCluster['owned']>[0]) => (obj.kind === 'Deployment' ? undefined : owned(obj)) });
    await run();
    deps.cache = cluster;
    cluster.writes.length = 0;
    for (const ready of [1, 2, 3]) {
      rollOut(cluster, ready);
      await run();
    }
    expect(cluster.writes.filter((w) => w.verb === 'apply').map((w) => w.kind)).toEqual(['Deployment']);
  });

  it('applies nothing when only the resource’s own status or metadata changed', async () => {
    const { cluster, run } = setup();
    await run();
    const applies = cluster.count('apply');
    // Its own status write is the first such change; a label is the second.
    await run();
    const m = cluster.multiplexedDeployment('ml', 'wine')!;
    cluster.put({ ...m, metadata: { ...m.metadata, labels: { team: 'ml' } } });
    await run();
    expect(cluster.count('apply')).toBe(applies);
  });

  it('applies every object again after a spec change, and its status follows the new generation', async () => {
    const { cluster, run } = setup();
    await run();
    editSpec(cluster, { maxModelsPerReplica: 7 });
    await run();
    expect(cluster.count('apply')).toBe(10);
    const env = (cluster.deployment('ml', 'wine')?.spec?.template.spec?.containers[0]?.env ?? []).find((e) => e.name === 'MODELMUX_MAX_MODELS');
    expect(env?.value).toBe('7');
    expect(statusOf(cluster)?.observedGeneration).toBe(4);
    expect(condition(cluster, 'Degraded')?.observedGeneration).toBe(4);
  });

  it('applies again only the owned object someone changed or deleted', async () => {
    const { cluster, run } = setup();
    await run();
    const d = cluster.get('apps/v1', 'Deployment', 'ml', 'wine') as V1Deployment;
    cluster.put({ ...d, spec: { ...d.spec!, replicas: 9 } });
    cluster.remove('rbac.authorization.k8s.io/v1', 'Role', 'ml', 'wine-replica');
    cluster.writes.length = 0;
    await run();
    expect(cluster.writes.filter((w) => w.verb === 'apply').map((w) => w.kind)).toEqual(['Role', 'Deployment']);
    expect(cluster.deployment('ml', 'wine')?.spec?.replicas).toBe(3);
    expect(cluster.get('rbac.authorization.k8s.io/v1', 'Role', 'ml', 'wine-replica')).toBeDefined();
  });

  it('applies everything once more after a resync forgets what was applied', async () => {
    const { cluster, deps, run } = setup();
    await run();
    deps.applied.clear();
    await run();
    await run();
    expect(cluster.count('apply')).toBe(10);
  });

  it('throws a failed apply for the queue to retry, with a Warning event and Degraded/ReconcileError, then applies everything on the retry', async () => {
    const { cluster, run } = setup();
    await run();
    editSpec(cluster, { maxModelsPerReplica: 7 });
    cluster.failApply = (obj) => (obj.kind === 'Service' ? new Error('service refused') : undefined);
    await expect(run()).rejects.toThrow('service refused');
    expect(condition(cluster, 'Degraded')).toMatchObject({ status: 'True', reason: 'ReconcileError', message: 'service refused', observedGeneration: 4 });
    expect(cluster.writes.filter((w) => w.verb === 'create').map((w) => w.kind)).toEqual(['Event']);
    cluster.failApply = undefined;
    cluster.writes.length = 0;
    await run();
    expect(cluster.count('apply')).toBe(5);
    expect(condition(cluster, 'Degraded')?.status).toBe('False');
  });

  it('ends terminally on a spec the schema refuses: Degraded/InvalidSpec, an event, nothing applied', async () => {
    const bad = storedResource();
    const { cluster, run } = setup({ ...bad, spec: { ...bad.spec, resources: { requests: { '': '1' } } } });
    expect(await run()).toEqual({ terminal: true });
    expect(cluster.count('apply')).toBe(0);
    expect(condition(cluster, 'Degraded')).toMatchObject({ status: 'True', reason: 'InvalidSpec', observedGeneration: 3 });
    expect(cluster.count('create')).toBe(1);
  });

  it('asks to look again while the rollout progresses, and not once it is complete', async () => {
    const { cluster, run } = setup();
    expect(await run()).toEqual({ requeueAfterMs: 15_000 });
    rollOut(cluster, 3);
    expect(await run()).toEqual({});
  });

  it('deletes the HPA it made once autoscaling is unset, and never a user’s HPA of that name', async () => {
    const { cluster, run } = setup(autoscaledResource());
    await run();
    expect(cluster.horizontalPodAutoscaler('ml', 'wine')).toBeDefined();
    editSpec(cluster, { autoscaling: undefined });
    await run();
    expect(cluster.horizontalPodAutoscaler('ml', 'wine')).toBeUndefined();
    cluster.put({ apiVersion: 'autoscaling/v2', kind: 'HorizontalPodAutoscaler', metadata: { name: 'wine', namespace: 'ml' } });
    await run();
    expect(cluster.horizontalPodAutoscaler('ml', 'wine')).toBeDefined();
    expect(cluster.count('delete')).toBe(1);
  });

  it('does nothing for a resource that is gone or being deleted', async () => {
    const { cluster, run } = setup();
    const m = cluster.multiplexedDeployment('ml', 'wine')!;
    cluster.put({ ...m, metadata: { ...m.metadata, deletionTimestamp: NOW } });
    expect(await run()).toEqual({});
    cluster.remove('modelmux.io/v1alpha1', 'MultiplexedDeployment', 'ml', 'wine');
    expect(await run()).toEqual({});
    expect(cluster.writes).toEqual([]);
  });
});
