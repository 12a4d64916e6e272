import type { KubernetesObject, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { apiErrorMessage } from '../common/kube-api-errors.js';
import { multiplexedDeploymentSpecSchema, type MultiplexedDeployment, type MultiplexedDeploymentStatus } from '../common/resource.js';
import type { Logger } from '../common/log.js';
import type { ApplyRecords } from './apply-records.js';
import type { ObjectReader } from './caches.js';
import type { EventSink } from './events.js';
import type { ObjectWriter } from './kube-writer.js';
import type { DeploymentOptions } from './resources/deployment.js';
import { desiredState } from './resources/desired.js';
import { ownedNames, type StoredMultiplexedDeployment } from './resources/meta.js';
import { computeStatus, statusChanged, type ReconcileFailure } from './status.js';

/** What the work queue does with the key afterwards (controller-runtime's reconcile.Result). */
export interface ReconcileResult {
  /** Look again after this long even without an event. */
  requeueAfterMs?: number;
  /** A failure retrying cannot fix (only an edit of the resource can); surfaced in status. */
  terminal?: boolean;
}

export interface ReconcilerDeps {
  /** The informers' caches: a reconcile reads nothing from the API server. */
  cache: ObjectReader;
  writer: ObjectWriter;
  events: EventSink;
  /** What this process last applied for each resource: a status-only wake-up applies nothing. */
  applied: ApplyRecords;
  options: DeploymentOptions;
  log: Logger;
  now: () => Date;
}

/** While a rollout is under way, look again this often in case an event is missed. */
const PROGRESS_RECHECK_MS = 15_000;

function controlledBy(obj: { metadata?: { ownerReferences?: { uid: string; controller?: boolean }[] } }, uid: string): boolean {
  return (obj.metadata?.ownerReferences ?? []).some((r) => r.uid === uid && r.controller === true);
}

/**
 * Level-triggered and idempotent: reads the resource, what it owns and its pods from the
 * informers' caches and converges every owned object to the desired state with server-side
 * apply, whatever event woke it — unless the caches show them all as this process last applied
 * them (apply-records.ts), changed in status at most: then only the status is recomputed. A
 * failure is recorded as an Event and as Degraded, then thrown so the queue retries with backoff.
 */
export async function reconcile(deps: ReconcilerDeps, namespace: string, name: string): Promise<ReconcileResult> {
  const { cache, writer } = deps;
  const key = `${namespace}/${name}`;
  const raw = cache.multiplexedDeployment(namespace, name);
  // Gone: the garbage collector removes what it owned through the ownerReferences.
  if (raw === undefined || raw.metadata.deletionTimestamp !== undefined) {
    deps.applied.forget(key);
    return {};
  }
  const uid = raw.metadata.uid;
  if (uid === undefined) throw new Error(`${key} has no uid`);

  const parsed = multiplexedDeploymentSpecSchema.safeParse(raw.spec);
  if (!parsed.success) {
    // The CRD schema refuses most bad specs; this catches what it cannot express. Terminal: only a spec edit helps.
    deps.applied.forget(key);
    const message = parsed.error.issues.map((i) => `spec.${i.path.join('.')}: ${i.message}`).join('; ');
    await deps.events.record(raw, 'Warning', 'InvalidSpec', message);
    await writeStatus(deps, raw, { ...raw, spec: { ...raw.spec, replicas: raw.spec.replicas ?? 0 } }, undefined, [], { reason: 'InvalidSpec', message });
    return { terminal: true };
  }
  const mxd: StoredMultiplexedDeployment = { ...raw, spec: parsed.data, metadata: { ...raw.metadata, uid } };
  const names = ownedNames(mxd);
  const desired = desiredState(mxd, deps.options);

  let deployment = cache.deployment(namespace, names.deployment);
  try {
    const live = (obj: KubernetesObject): KubernetesObject | undefined => cache.owned(obj);
    const plan = deps.applied.plan(key, desired.objects, live);
    if (plan !== undefined) {
      deps.log.info('applying owned objects', { reason: plan.reason, kinds: plan.objects.map((o) => o.kind) });
      const stored = [];
      for (const obj of plan.objects) {
        const answer = await writer.apply(obj);
        stored.push(answer);
        // The apply's answer is the Deployment as stored now, fresher than the cache.
        if (obj === desired.deployment) deployment = answer;
      }
      deps.applied.remember(key, desired.objects, plan.objects, stored, live);
    }
    if (desired.hpa === undefined) {
      const existing = cache.horizontalPodAutoscaler(namespace, names.hpa);
      // Only ever delete an HPA this resource made; a user's HPA of the same name is theirs.
      if (existing !== undefined && controlledBy(existing, uid)) await writer.delete({ apiVersion: 'autoscaling/v2', kind: 'HorizontalPodAutoscaler', metadata: { name: names.hpa, namespace } });
    }
  } catch (err) {
    deps.applied.forget(key);
    const failure: ReconcileFailure = { reason: 'ReconcileError', message: apiErrorMessage(err) };
    await deps.events.record(mxd, 'Warning', 'ReconcileError', failure.message);
    try {
      await writeStatus(deps, raw, mxd, cache.deployment(namespace, names.deployment), cache.replicaPods(namespace, name), failure);
    } catch (statusErr) {
      deps.log.warn('could not write the failure to status', { key, error: apiErrorMessage(statusErr) });
    }
    throw err;
  }

  const status = await writeStatus(deps, raw, mxd, deployment, cache.replicaPods(namespace, name), undefined);
  const progressing = status.conditions?.find((c) => c.type === 'Progressing')?.status === 'True';
  return progressing ? { requeueAfterMs: PROGRESS_RECHECK_MS } : {};
}

async function writeStatus(
  deps: ReconcilerDeps,
  stored: MultiplexedDeployment,
  mxd: MultiplexedDeployment,
  deployment: V1Deployment | undefined,
  pods: readonly V1Pod[],
  failure: ReconcileFailure | undefined,
): Promise<MultiplexedDeploymentStatus> {
  const status = computeStatus({ mxd, deployment, pods, now: deps.now(), ...(failure ? { failure } : {}) });
  if (statusChanged(stored.status, status)) await deps.writer.patchStatus(mxd.metadata.namespace, mxd.metadata.name, status);
  return status;
}
