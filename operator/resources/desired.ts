import type { KubernetesObject, V1Deployment, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import { buildDeployment, type DeploymentOptions } from './deployment.js';
import { buildHpa } from './hpa.js';
import type { StoredMultiplexedDeployment } from './meta.js';
import { buildReplicaRole, buildReplicaRoleBinding, buildReplicaServiceAccount } from './replica-rbac.js';
import { buildService } from './service.js';

/** Everything a resource should own. Pure. */
export interface DesiredState {
  /** What to apply, in order: the replicas' ServiceAccount, RBAC and Service before the Deployment whose pods use them. */
  objects: readonly KubernetesObject[];
  deployment: V1Deployment;
  /** Undefined when autoscaling is off: an HPA the resource made is then deleted. */
  hpa: V2HorizontalPodAutoscaler | undefined;
}

export function desiredState(mxd: StoredMultiplexedDeployment, options: DeploymentOptions): DesiredState {
  const deployment = buildDeployment(mxd, options);
  const hpa = buildHpa(mxd);
  const objects: KubernetesObject[] = [buildReplicaServiceAccount(mxd), buildReplicaRole(mxd), buildReplicaRoleBinding(mxd), buildService(mxd), deployment];
  if (hpa !== undefined) objects.push(hpa);
  return { objects, deployment, hpa };
}
