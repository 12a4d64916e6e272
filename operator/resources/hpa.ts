import type { V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION, KIND } from '../../common/names.js';
import { ownedMeta, ownedNames, type StoredMultiplexedDeployment } from './meta.js';

/** The per-pod gauge each replica exports (through a Prometheus adapter as a Pods metric). */
export const ONGOING_REQUESTS_METRIC = 'modelmux_replica_ongoing_requests';

/** A positive number as a Kubernetes quantity: whole numbers as is, fractions in milli-units. */
export function toQuantity(value: number): string {
  return Number.isInteger(value) ? String(value) : `${Math.max(1, Math.round(value * 1000))}m`;
}

/**
 * The HPA scales the MultiplexedDeployment itself through its /scale subresource, so
 * spec.replicas stays the one place the replica count lives; undefined when autoscaling is off.
 */
export function buildHpa(mxd: StoredMultiplexedDeployment): V2HorizontalPodAutoscaler | undefined {
  const a = mxd.spec.autoscaling;
  if (a === undefined) return undefined;
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: ownedMeta(mxd, ownedNames(mxd).hpa),
    spec: {
      scaleTargetRef: { apiVersion: `${API_GROUP}/${API_VERSION}`, kind: KIND, name: mxd.metadata.name },
      minReplicas: a.minReplicas,
      maxReplicas: a.maxReplicas,
      metrics: [
        {
          type: 'Pods',
          pods: { metric: { name: ONGOING_REQUESTS_METRIC }, target: { type: 'AverageValue', averageValue: toQuantity(a.targetOngoingRequests) } },
        },
      ],
    },
  };
}
