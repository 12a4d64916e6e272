import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { Condition, MultiplexedDeployment, MultiplexedDeploymentStatus } from '../common/resource.js';
import { checkTableBounds } from '../common/table-bounds.js';
import { selectorString } from './resources/meta.js';
import { startRefusal } from './start-refusal.js';

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

/** The replica Deployment's rollout as its status reports it: zeros before it exists. */
interface Rollout {
  desired: number;
  replicas: number;
  ready: number;
  updated: number;
  available: number;
  /** Whether the Deployment's status speaks of its current spec. */
  observed: boolean;
}

function rolloutOf(desired: number, deployment: V1Deployment | undefined): Rollout {
  const ds = deployment?.status;
  return {
    desired,
    replicas: ds?.replicas ?? 0,
    ready: ds?.readyReplicas ?? 0,
    updated: ds?.updatedReplicas ?? 0,
    available: ds?.availableReplicas ?? 0,
    observed: deployment !== undefined && (ds?.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? Number.MAX_SAFE_INTEGER),
  };
}

/**
 * Degraded by the first problem found: the last reconcile's failure, a replica refusing to start
 * (exit 2: a crash loop that restarts cannot end), an unschedulable pod, the Deployment's ReplicaFailure.
 */
function degradedCondition(input: StatusInputs): ConditionCore {
  if (input.failure) return { type: 'Degraded', status: 'True', ...input.failure };
  const refusal = input.pods.map(startRefusal).find((m) => m !== undefined);
  if (refusal !== undefined) return { type: 'Degraded', status: 'True', reason: 'ReplicaRefusesToStart', message: refusal };
  const unschedulable = input.pods.map(unschedulableMessage).find((m) => m !== undefined);
  if (unschedulable !== undefined) return { type: 'Degraded', status: 'True', reason: 'Unschedulable', message: unschedulable };
  const replicaFailure = deploymentFailure(input.deployment);
  if (replicaFailure !== undefined) return { type: 'Degraded', status: 'True', reason: 'ReplicaFailure', message: replicaFailure };
  return { type: 'Degraded', status: 'False', reason: 'AsExpected', message: 'No problem found.' };
}

function progressingCondition(r: Rollout, deployment: V1Deployment | undefined): ConditionCore {
  const { desired, updated, available } = r;
  const rolledOut = r.observed && updated === desired && r.replicas === desired && available === desired;
  if (rolledOut) return { type: 'Progressing', status: 'False', reason: 'Complete', message: `All ${desired} replicas run the current spec.` };
  if (deployment === undefined) return { type: 'Progressing', status: 'True', reason: 'Creating', message: 'The replica Deployment is being created.' };
  return { type: 'Progressing', status: 'True', reason: 'RollingOut', message: `${updated} of ${desired} replicas updated, ${available} available.` };
}

function readyCondition(r: Rollout): ConditionCore {
  const message = `${r.ready} of ${r.desired} replicas ready.`;
  return r.observed && r.ready >= r.desired && r.updated >= r.desired
    ? { type: 'Ready', status: 'True', reason: 'ReplicasReady', message }
    : { type: 'Ready', status: 'False', reason: 'ReplicasNotReady', message };
}

/** The spec's own verdict, apart from Degraded: a reconcile failure must not hide it. */
function tablesBoundedCondition(mxd: MultiplexedDeployment): ConditionCore {
  const bounds = checkTableBounds(mxd.spec);
  return bounds.ok
    ? { type: 'TablesBounded', status: 'True', reason: 'WithinBounds', message: bounds.message }
    : { type: 'TablesBounded', status: 'False', reason: bounds.reason, message: bounds.message };
}

/** A condition keeps its lastTransitionTime while its status does not change. */
function stamped(c: ConditionCore, previous: readonly Condition[], generation: number | undefined, now: Date): Condition {
  const before = previous.find((p) => p.type === c.type);
  const lastTransitionTime = before !== undefined && before.status === c.status ? before.lastTransitionTime : now.toISOString();
  return generation === undefined ? { ...c, lastTransitionTime } : { ...c, lastTransitionTime, observedGeneration: generation };
}

/**
 * The status a resource should have, from what was just read. Pure: a condition keeps its
 * lastTransitionTime while its status does not change, as kubectl wait and dashboards expect.
 */
export function computeStatus(input: StatusInputs): MultiplexedDeploymentStatus {
  const { mxd, deployment } = input;
  const generation = mxd.metadata.generation;
  const rollout = rolloutOf(mxd.spec.replicas, deployment);
  const previous = mxd.status?.conditions ?? [];
  const conditions = [readyCondition(rollout), progressingCondition(rollout, deployment), degradedCondition(input), tablesBoundedCondition(mxd)].map((c) =>
    stamped(c, previous, generation, input.now),
  );
  const status: MultiplexedDeploymentStatus = { replicas: rollout.replicas, readyReplicas: rollout.ready, selector: selectorString(mxd), conditions };
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
