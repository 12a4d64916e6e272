import { OPERATOR_CLUSTER_RULES, OPERATOR_LEADER_ELECTION_RULES } from '../../operator/rbac-rules.js';

/**
 * The operator's service account in `namespace` with exactly the RBAC the chart grants it
 * (operator/rbac-rules.ts), as a kubectl List: a cluster test runs the operator as that
 * account, so a verb missing from the rules fails the test.
 */
export function operatorRbac(namespace: string, name = 'modelmux-operator'): string {
  const sa = { kind: 'ServiceAccount', name, namespace };
  const items = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules: OPERATOR_CLUSTER_RULES },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [sa],
    },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name, namespace }, rules: OPERATOR_LEADER_ELECTION_RULES },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [sa],
    },
  ];
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}
