import type { ControlPlane } from '../../harness/control-plane.js';

/**
 * Pods a router routes to without a scheduler or a kubelet, for cluster tests that run the
 * replica processes themselves: the pod objects, the status that makes them ready at a
 * loopback address, the router's read-only access and the replicas' own.
 */

/** A pod of `deployment` that no scheduler or kubelet touches (unknown schedulerName). */
export function unscheduledPod(name: string, namespace: string, deployment: string, annotations: Record<string, string> = {}): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { 'modelmux.io/deployment': deployment }, annotations },
    spec: { schedulerName: 'nobody', containers: [{ name: 'replica', image: 'modelmux:test' }] },
  };
}

/** Writes the status a kubelet would: Running at `ip`, Ready or not. */
export async function setPodStatus(cp: ControlPlane, namespace: string, name: string, ip: string, ready: boolean): Promise<void> {
  const status = { phase: 'Running', podIP: ip, podIPs: [{ ip }], conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] };
  await cp.kubectl(['patch', 'pod', name, '-n', namespace, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
}

/** A service account `name` in `namespace` with what a router in kube mode reads (cluster-wide), as manifest items. */
export function routerAccess(namespace: string, name: string): unknown[] {
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name },
      rules: [
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['modelmux.io'], resources: ['multiplexeddeployments'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['modelmux.io'], resources: ['modelroutes'], verbs: ['list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  ];
}

/** A service account `name` in `namespace` that may get and patch pods, as the operator grants replicas, as manifest items. */
export function replicaAccess(namespace: string, name: string): unknown[] {
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name, namespace }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] }] },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  ];
}
