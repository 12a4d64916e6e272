import type { V1Role, V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import { ownedMeta, ownedNames, type StoredMultiplexedDeployment } from './meta.js';

/**
 * The replicas' identity. A replica publishes its model table and deletion cost on its own
 * pod, so it needs get and patch on pods of its namespace and nothing else (RBAC cannot
 * narrow to "its own pod": pod names are generated).
 */
export function buildReplicaServiceAccount(mxd: StoredMultiplexedDeployment): V1ServiceAccount {
  return { apiVersion: 'v1', kind: 'ServiceAccount', metadata: ownedMeta(mxd, ownedNames(mxd).serviceAccount) };
}

export function buildReplicaRole(mxd: StoredMultiplexedDeployment): V1Role {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: ownedMeta(mxd, ownedNames(mxd).role),
    rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] }],
  };
}

export function buildReplicaRoleBinding(mxd: StoredMultiplexedDeployment): V1RoleBinding {
  const names = ownedNames(mxd);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: ownedMeta(mxd, names.roleBinding),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: names.role },
    subjects: [{ kind: 'ServiceAccount', name: names.serviceAccount, namespace: mxd.metadata.namespace }],
  };
}
