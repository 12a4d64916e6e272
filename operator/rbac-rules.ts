import type { V1PolicyRule } from '@kubernetes/client-node';
import { ROUTE_PLURAL } from '../common/model-route.js';
import { API_GROUP, PLURAL } from '../common/names.js';

/**
 * The operator's own least-privilege RBAC, the one place the chart's ClusterRole and Role
 * are generated from. Every verb here is used by operator/; nothing more. Reads are list and
 * watch only: the informers list and watch every kind (caches.ts), and reconciles read their
 * caches, never get.
 */
export const OPERATOR_CLUSTER_RULES: readonly V1PolicyRule[] = [
  { apiGroups: [API_GROUP], resources: [PLURAL], verbs: ['list', 'watch'] },
  { apiGroups: [API_GROUP], resources: [`${PLURAL}/status`], verbs: ['patch'] },
  // blockOwnerDeletion on owned objects needs update on the owner's finalizers.
  { apiGroups: [API_GROUP], resources: [`${PLURAL}/finalizers`], verbs: ['update'] },
  // ModelRoutes: read, and their status conditions written (operator/route-status.ts); never the spec.
  { apiGroups: [API_GROUP], resources: [ROUTE_PLURAL], verbs: ['list', 'watch'] },
  { apiGroups: [API_GROUP], resources: [`${ROUTE_PLURAL}/status`], verbs: ['patch'] },
  // Server-side apply is a patch, and a patch that creates also needs create.
  { apiGroups: ['apps'], resources: ['deployments'], verbs: ['list', 'watch', 'create', 'patch'] },
  { apiGroups: [''], resources: ['services', 'serviceaccounts'], verbs: ['list', 'watch', 'create', 'patch'] },
  { apiGroups: ['rbac.authorization.k8s.io'], resources: ['roles', 'rolebindings'], verbs: ['list', 'watch', 'create', 'patch'] },
  { apiGroups: ['autoscaling'], resources: ['horizontalpodautoscalers'], verbs: ['list', 'watch', 'create', 'patch', 'delete'] },
  // get/patch on pods: RBAC only lets the operator grant the replicas' Role what it holds itself.
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'patch'] },
  { apiGroups: [''], resources: ['events'], verbs: ['create'] },
];

/** In the operator's own namespace only: the leader-election Lease. */
export const OPERATOR_LEADER_ELECTION_RULES: readonly V1PolicyRule[] = [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] }];
