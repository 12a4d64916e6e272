import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { Condition, MultiplexedDeployment, MultiplexedDeploymentStatus } from '../common/resource.js';
import { checkTableBounds } from '../common/table-bounds.js';
import { selectorString } from './resources/meta.js';

/** A failure of the last reconcile, surfaced as Degraded until a reconcile succeeds. */
export interface ReconcileFailure {
  reason: string;
  message: string;
}

export interface StatusInputs {
  mxd: MultiplexedDeployment;
  /** The owned Deployment as last read; undefined before it exists. */
  deployment: V1Deployment | undefined;
  /** Pods selected by the resource's selector. */
  pods: readonly V1Pod[];
  failure?: ReconcileFailure;
  now: Date;
}

type ConditionCore = Pick<Condition, 'type' | 'status' | 'reason' | 'message'>;

/** The scheduler's verdict on a pending pod, if it could not place it. */
export function unschedulableMessage(pod: V1Pod): string | undefined {
  if (pod.metadata?.deletionTimestamp !== undefined) return undefined;
  if (pod.status?.phase !== undefined && pod.status.phase !== 'Pending') return undefined;
  const c = pod.status?.conditions?.find((x) => x.type === 'PodScheduled');
  return c?.status === 'False' && c.reason === 'Unschedulable' ? (c.message ?? 'the scheduler cannot place the pod') : undefined;
}

function deploymentFailure(d: V1Deployment | undefined): string | undefined {
  const c = d?.status?.conditions?.find((x) => x.type === 'ReplicaFailure' && x.status === 'True');
  return c ? (c.message ?? c.reason ?? 'replica pods cannot be created') : undefined;
}

/**
 * The status a resource should have, from what was just read. Pure: a condition keeps its
 * lastTransitionTime while its status does not change, as kubectl wait and dashboards expect.
 */
export function computeStatus(input: StatusInputs): MultiplexedDeploymentStatus {
  const { mxd, deployment, pods } = input;
  const desired = mxd.spec.replicas;
  const generation = mxd.metadata.generation;
  const ds = deployment?.status;
  const replicas = ds?.replicas ?? 0;
  const ready = ds?.readyReplicas ?? 0;
  const updated = ds?.updatedReplicas ?? 0;
  const available = ds?.availableReplicas ?? 0;
  const deploymentObserved =
    deployment !== undefined && (ds?.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? Number.MAX_SAFE_INTEGER);
  const rolledOut = deploymentObserved && updated === desired && replicas === desired && available === desired;

  const unschedulable = pods.map(unschedulableMessage).find((m) => m !== undefined);
  const replicaFailure = deploymentFailure(deployment);

  const degraded: ConditionCore = input.failure
    ? { type: 'Degraded', status: 'True', ...input.failure }
    : unschedulable !== undefined
      ? { type: 'Degraded', status: 'True', reason: 'Unschedulable', message: unschedulable }
      : replicaFailure !== undefined
        ? { type: 'Degraded', status: 'True', reason: 'ReplicaFailure', message: replicaFailure }
        : { type: 'Degraded', status: 'False', reason: 'AsExpected', message: 'No problem found.' };

  const progressing: ConditionCore = rolledOut
    ? { type: 'Progressing', status: 'False', reason: 'Complete', message: `All ${desired} replicas run the current spec.` }
    : deployment === undefined
      ? { type: 'Progressing', status: 'True', reason: 'Creating', message: 'The replica Deployment is being created.' }
      : { type: 'Progressing', status: 'True', reason: 'RollingOut', message: `${updated} of ${desired} replicas updated, ${available} available.` };

  const isReady = deploymentObserved && ready >= desired && updated >= desired;
  const readyCond: ConditionCore = isReady
    ? { type: 'Ready', status: 'True', reason: 'ReplicasReady', message: `${ready} of ${desired} replicas ready.` }
    : { type: 'Ready', status: 'False', reason: 'ReplicasNotReady', message: `${ready} of ${desired} replicas ready.` };

  // The spec's own verdict, apart from Degraded: a reconcile failure must not hide it.
  const bounds = checkTableBounds(mxd.spec);
  const tablesBounded: ConditionCore = bounds.ok
    ? { type: 'TablesBounded', status: 'True', reason: 'WithinBounds', message: bounds.message }
    : { type: 'TablesBounded', status: 'False', reason: bounds.reason, message: bounds.message };

  const previous = mxd.status?.conditions ?? [];
  const conditions = [readyCond, progressing, degraded, tablesBounded].map((c): Condition => {
    const before = previous.find((p) => p.type === c.type);
    const lastTransitionTime = before !== undefined && before.status === c.status ? before.lastTransitionTime : input.now.toISOString();
    return generation === undefined ? { ...c, lastTransitionTime } : { ...c, lastTransitionTime, observedGeneration: generation };
  });

  const status: MultiplexedDeploymentStatus = { replicas, readyReplicas: ready, selector: selectorString(mxd), conditions };
  if (generation !== undefined) status.observedGeneration = generation;
  return status;
}

/** Whether a desired status differs from the stored one: a write is skipped when it would change nothing. */
export function statusChanged(before: MultiplexedDeploymentStatus | undefined, after: MultiplexedDeploymentStatus): boolean {
  return JSON.stringify(normalize(before)) !== JSON.stringify(normalize(after));
}

function normalize(s: MultiplexedDeploymentStatus | undefined): unknown {
  if (s === undefined) return undefined;
  return {
    observedGeneration: s.observedGeneration,
    replicas: s.replicas,
    readyReplicas: s.readyReplicas,
    selector: s.selector,
    conditions: [...(s.conditions ?? [])].sort((a, b) => a.type.localeCompare(b.type)).map((c) => [c.type, c.status, c.reason, c.message, c.lastTransitionTime, c.observedGeneration]),
  };
}
