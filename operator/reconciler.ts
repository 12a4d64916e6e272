import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION, PLURAL } from '../common/names.js';
import { multiplexedDeploymentSpecSchema, type MultiplexedDeployment, type MultiplexedDeploymentStatus } from '../common/resource.js';
import type { Logger } from '../common/log.js';
import type { EventRecorder } from './events.js';
import { isStatus, resourcePath, type KubeClient } from './kube-client.js';
import { buildDeployment, type DeploymentOptions } from './resources/deployment.js';
import { buildHpa } from './resources/hpa.js';
import { ownedNames, selectorString, type StoredMultiplexedDeployment } from './resources/meta.js';
import { buildReplicaRole, buildReplicaRoleBinding, buildReplicaServiceAccount } from './resources/replica-rbac.js';
import { buildService } from './resources/service.js';
import { computeStatus, statusChanged, type ReconcileFailure } from './status.js';

/** What the work queue does with the key afterwards (controller-runtime's reconcile.Result). */
export interface ReconcileResult {
  /** Look again after this long even without an event. */
  requeueAfterMs?: number;
  /** A failure retrying cannot fix (only an edit of the resource can); surfaced in status. */
  terminal?: boolean;
}

export interface ReconcilerDeps {
  client: KubeClient;
  events: EventRecorder;
  options: DeploymentOptions;
  log: Logger;
  now: () => Date;
}

/** While a rollout is under way, look again this often in case an event is missed. */
const PROGRESS_RECHECK_MS = 15_000;

export function mxdPath(namespace: string, name?: string): string {
  return resourcePath(`${API_GROUP}/${API_VERSION}`, PLURAL, namespace, name);
}

interface StoredObject {
  metadata?: { ownerReferences?: { uid: string; controller?: boolean }[] };
}

function controlledBy(obj: StoredObject, uid: string): boolean {
  return (obj.metadata?.ownerReferences ?? []).some((r) => r.uid === uid && r.controller === true);
}

/**
 * Level-triggered and idempotent: reads the resource and converges every owned object to
 * the desired state with server-side apply, whatever event woke it. A failure is recorded
 * as an Event and as Degraded, then thrown so the queue retries with backoff.
 */
export async function reconcile(deps: ReconcilerDeps, namespace: string, name: string): Promise<ReconcileResult> {
  const { client } = deps;
  const raw = await client.find<MultiplexedDeployment & { metadata: { deletionTimestamp?: string } }>(mxdPath(namespace, name));
  // Gone: the garbage collector removes what it owned through the ownerReferences.
  if (raw === undefined || raw.metadata.deletionTimestamp !== undefined) return {};
  const uid = raw.metadata.uid;
  if (uid === undefined) throw new Error(`${namespace}/${name} has no uid`);

  const parsed = multiplexedDeploymentSpecSchema.safeParse(raw.spec);
  if (!parsed.success) {
    // The CRD schema refuses most bad specs; this catches what it cannot express. Terminal: only a spec edit helps.
    const message = parsed.error.issues.map((i) => `spec.${i.path.join('.')}: ${i.message}`).join('; ');
    await deps.events.record(raw, 'Warning', 'InvalidSpec', message);
    await writeStatus(deps, raw, { ...raw, spec: { ...raw.spec, replicas: raw.spec.replicas ?? 0 } }, undefined, [], { reason: 'InvalidSpec', message });
    return { terminal: true };
  }
  const mxd: StoredMultiplexedDeployment = { ...raw, spec: parsed.data, metadata: { ...raw.metadata, uid } };
  const names = ownedNames(mxd);

  let deployment: V1Deployment;
  try {
    await client.apply(resourcePath('v1', 'serviceaccounts', namespace, names.serviceAccount), buildReplicaServiceAccount(mxd));
    await client.apply(resourcePath('rbac.authorization.k8s.io/v1', 'roles', namespace, names.role), buildReplicaRole(mxd));
    await client.apply(resourcePath('rbac.authorization.k8s.io/v1', 'rolebindings', namespace, names.roleBinding), buildReplicaRoleBinding(mxd));
    await client.apply(resourcePath('v1', 'services', namespace, names.service), buildService(mxd));
    deployment = await client.apply<V1Deployment>(resourcePath('apps/v1', 'deployments', namespace, names.deployment), buildDeployment(mxd, deps.options));
    const hpaPath = resourcePath('autoscaling/v2', 'horizontalpodautoscalers', namespace, names.hpa);
    const hpa = buildHpa(mxd);
    if (hpa !== undefined) await client.apply(hpaPath, hpa);
    else {
      const existing = await client.find<StoredObject>(hpaPath);
      // Only ever delete an HPA this resource made; a user's HPA of the same name is theirs.
      if (existing !== undefined && controlledBy(existing, uid)) await client.delete(hpaPath);
    }
  } catch (err) {
    const failure: ReconcileFailure = { reason: 'ReconcileError', message: err instanceof Error ? err.message : String(err) };
    await deps.events.record(mxd, 'Warning', 'ReconcileError', failure.message);
    try {
      const current = await client.find<V1Deployment>(resourcePath('apps/v1', 'deployments', namespace, names.deployment));
      // A selector the API server refuses is one way to get here: report without pods then.
      const pods = await listPods(client, mxd).catch(() => []);
      await writeStatus(deps, raw, mxd, current, pods, failure);
    } catch (statusErr) {
      deps.log.warn('could not write the failure to status', { key: `${namespace}/${name}`, error: String(statusErr) });
    }
    throw err;
  }

  const pods = await listPods(client, mxd);
  const status = await writeStatus(deps, raw, mxd, deployment, pods, undefined);
  const progressing = status.conditions?.find((c) => c.type === 'Progressing')?.status === 'True';
  return progressing ? { requeueAfterMs: PROGRESS_RECHECK_MS } : {};
}

async function listPods(client: KubeClient, mxd: MultiplexedDeployment): Promise<V1Pod[]> {
  const list = await client.request<{ items?: V1Pod[] }>('GET', resourcePath('v1', 'pods', mxd.metadata.namespace), {
    query: { labelSelector: selectorString(mxd) },
  });
  return list.items ?? [];
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
  if (!statusChanged(stored.status, status)) return status;
  try {
    await deps.client.mergePatch(`${mxdPath(mxd.metadata.namespace, mxd.metadata.name)}/status`, { status });
  } catch (err) {
    // Deleted meanwhile: nothing left to report on.
    if (!isStatus(err, 404)) throw err;
  }
  return status;
}
