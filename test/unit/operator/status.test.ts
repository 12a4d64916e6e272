import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { multiplexedDeploymentSpecSchema, type MultiplexedDeployment, type MultiplexedDeploymentStatus } from '../../../common/resource.js';
import { MAX_TABLE_ENTRIES, MAX_TABLE_PATCHES_PER_SECOND } from '../../../common/table-bounds.js';
import { computeStatus, statusChanged, unschedulableMessage } from '../../../operator/status.js';

const NOW = new Date('2026-01-01T12:00:00Z');

function mxd(replicas: number, status?: MultiplexedDeploymentStatus): MultiplexedDeployment {
  const m: MultiplexedDeployment = {
    apiVersion: 'modelmux.io/v1alpha1',
    kind: 'MultiplexedDeployment',
    metadata: { name: 'wine', namespace: 'ml', uid: 'u', generation: 4 },
    spec: multiplexedDeploymentSpecSchema.parse({ replicas, routePrefix: '/wine', modelSource: { uri: 'file:///m' } }),
  };
  if (status) m.status = status;
  return m;
}

function deployment(s: { replicas: number; ready: number; updated: number; available: number; observed?: number }, extra: Partial<NonNullable<V1Deployment['status']>> = {}): V1Deployment {
  return {
    metadata: { name: 'wine', generation: 2 },
    status: { observedGeneration: s.observed ?? 2, replicas: s.replicas, readyReplicas: s.ready, updatedReplicas: s.updated, availableReplicas: s.available, ...extra },
  };
}

const pending: V1Pod = {
  metadata: { name: 'wine-1' },
  status: {
    phase: 'Pending',
    conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/1 nodes are available: 1 Insufficient nvidia.com/gpu.' }],
  },
};

const cond = (s: MultiplexedDeploymentStatus, type: string) => s.conditions?.find((c) => c.type === type);

describe('computeStatus', () => {
  it('is Ready, not Progressing, not Degraded when every replica of the current spec is ready', () => {
    const s = computeStatus({ mxd: mxd(3), deployment: deployment({ replicas: 3, ready: 3, updated: 3, available: 3 }), pods: [], now: NOW });
    expect(s.observedGeneration).toBe(4);
    expect(s.replicas).toBe(3);
    expect(s.readyReplicas).toBe(3);
    expect(s.selector).toBe('modelmux.io/deployment=wine');
    expect(cond(s, 'Ready')).toMatchObject({ status: 'True', reason: 'ReplicasReady', observedGeneration: 4, lastTransitionTime: NOW.toISOString() });
    expect(cond(s, 'Progressing')).toMatchObject({ status: 'False', reason: 'Complete' });
    expect(cond(s, 'Degraded')).toMatchObject({ status: 'False', reason: 'AsExpected' });
  });

  it('is Progressing and not Ready while a rollout is under way', () => {
    const s = computeStatus({ mxd: mxd(3), deployment: deployment({ replicas: 4, ready: 3, updated: 1, available: 3 }), pods: [], now: NOW });
    expect(cond(s, 'Ready')?.status).toBe('False');
    expect(cond(s, 'Progressing')).toMatchObject({ status: 'True', reason: 'RollingOut', message: '1 of 3 replicas updated, 3 available.' });
  });

  it('does not trust Deployment counts the Deployment controller has not caught up with', () => {
    const s = computeStatus({ mxd: mxd(3), deployment: deployment({ replicas: 3, ready: 3, updated: 3, available: 3, observed: 1 }), pods: [], now: NOW });
    expect(cond(s, 'Ready')?.status).toBe('False');
    expect(cond(s, 'Progressing')?.status).toBe('True');
  });

  it('is Degraded/Unschedulable with the scheduler’s own message when a pod cannot be placed', () => {
    const s = computeStatus({ mxd: mxd(2), deployment: deployment({ replicas: 2, ready: 1, updated: 2, available: 1 }), pods: [pending], now: NOW });
    expect(cond(s, 'Degraded')).toMatchObject({ status: 'True', reason: 'Unschedulable', message: '0/1 nodes are available: 1 Insufficient nvidia.com/gpu.' });
  });

  it('is Degraded/ReplicaFailure when the Deployment cannot create pods', () => {
    const d = deployment({ replicas: 0, ready: 0, updated: 0, available: 0 }, { conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'exceeded quota' }] });
    expect(cond(computeStatus({ mxd: mxd(1), deployment: d, pods: [], now: NOW }), 'Degraded')).toMatchObject({ reason: 'ReplicaFailure', message: 'exceeded quota' });
  });

  it('puts a reconcile failure first', () => {
    const s = computeStatus({ mxd: mxd(1), deployment: undefined, pods: [pending], failure: { reason: 'ReconcileError', message: 'forbidden' }, now: NOW });
    expect(cond(s, 'Degraded')).toMatchObject({ status: 'True', reason: 'ReconcileError', message: 'forbidden' });
    expect(cond(s, 'Progressing')?.reason).toBe('Creating');
    expect(s.replicas).toBe(0);
  });

  it('keeps lastTransitionTime while a condition’s status stays, and moves it when it flips', () => {
    const before = computeStatus({ mxd: mxd(1), deployment: deployment({ replicas: 1, ready: 0, updated: 1, available: 0 }), pods: [], now: new Date('2026-01-01T00:00:00Z') });
    const later = new Date('2026-01-01T00:05:00Z');
    const same = computeStatus({ mxd: mxd(1, before), deployment: deployment({ replicas: 1, ready: 0, updated: 1, available: 0 }), pods: [], now: later });
    expect(cond(same, 'Ready')?.lastTransitionTime).toBe('2026-01-01T00:00:00.000Z');
    expect(statusChanged(before, same)).toBe(false);
    const flipped = computeStatus({ mxd: mxd(1, before), deployment: deployment({ replicas: 1, ready: 1, updated: 1, available: 1 }), pods: [], now: later });
    expect(cond(flipped, 'Ready')?.lastTransitionTime).toBe(later.toISOString());
    expect(cond(flipped, 'Degraded')?.lastTransitionTime).toBe('2026-01-01T00:00:00.000Z');
    expect(statusChanged(before, flipped)).toBe(true);
  });
});

describe('the TablesBounded condition', () => {
  const withSpec = (extra: Record<string, unknown>): MultiplexedDeployment => ({
    ...mxd(1),
    spec: multiplexedDeploymentSpecSchema.parse({ routePrefix: '/wine', modelSource: { uri: 'file:///m' }, ...extra }),
  });
  const tables = (extra: Record<string, unknown>) => cond(computeStatus({ mxd: withSpec(extra), deployment: undefined, pods: [], now: NOW }), 'TablesBounded');

  it('is True for a pool within the bounds, with what it costs', () => {
    expect(tables({ replicas: 10, maxModelsPerReplica: 100 })).toMatchObject({
      status: 'True',
      reason: 'WithinBounds',
      message: `Up to 10 table patches a second and 1,000 table entries per router.`,
    });
  });

  it('is False when the largest replica count would publish more patches a second than measured to hold, naming the interval to set', () => {
    const c = tables({ replicas: 2, autoscaling: { maxReplicas: MAX_TABLE_PATCHES_PER_SECOND * 2 }, tablePublishIntervalMs: 1000 });
    expect(c).toMatchObject({ status: 'False', reason: 'TooManyTablePatches' });
    expect(c?.message).toContain('set tablePublishIntervalMs to at least 2,000');
    // The interval it names is enough.
    expect(tables({ replicas: 2, autoscaling: { maxReplicas: MAX_TABLE_PATCHES_PER_SECOND * 2 }, tablePublishIntervalMs: 2000 })?.status).toBe('True');
  });

  it('is False when every router would keep more table entries than it is sized for, whatever the interval', () => {
    const c = tables({ replicas: 200, maxModelsPerReplica: 10_000, tablePublishIntervalMs: 60_000 });
    expect(MAX_TABLE_ENTRIES).toBeLessThan(200 * 10_000);
    expect(c).toMatchObject({ status: 'False', reason: 'TooManyTableEntries' });
    expect(c?.message).toContain(`lower maxModelsPerReplica to at most ${(MAX_TABLE_ENTRIES / 200).toLocaleString('en-US')}`);
  });

  it('stays beside a reconcile failure instead of being hidden by it', () => {
    const s = computeStatus({ mxd: withSpec({ replicas: 1000, maxModelsPerReplica: 10_000 }), deployment: undefined, pods: [], failure: { reason: 'ReconcileError', message: 'forbidden' }, now: NOW });
    expect(cond(s, 'Degraded')?.reason).toBe('ReconcileError');
    expect(cond(s, 'TablesBounded')?.reason).toBe('TooManyTableEntries');
  });
});

describe('unschedulableMessage', () => {
  it('ignores running, deleted or merely unscheduled-yet pods', () => {
    expect(unschedulableMessage(pending)).toContain('Insufficient');
    expect(unschedulableMessage({ ...pending, metadata: { deletionTimestamp: new Date() } })).toBeUndefined();
    expect(unschedulableMessage({ status: { phase: 'Running' } })).toBeUndefined();
    expect(unschedulableMessage({ status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'SchedulerError' }] } })).toBeUndefined();
  });
});
