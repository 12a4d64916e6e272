import type { KubernetesObject } from '@kubernetes/client-node';
import { multiplexedDeploymentSpecSchema, type MultiplexedDeploymentSpecInput } from '../../../common/resource.js';
import { desiredState } from '../../../operator/resources/desired.js';
import type { StoredMultiplexedDeployment } from '../../../operator/resources/meta.js';

/** A stored resource `wine` in namespace `ml` with S3 credentials and a GPU; `spec` overrides. */
export function storedResource(spec: Partial<MultiplexedDeploymentSpecInput> = {}): StoredMultiplexedDeployment {
  return {
    apiVersion: 'modelmux.io/v1alpha1',
    kind: 'MultiplexedDeployment',
    metadata: { name: 'wine', namespace: 'ml', uid: 'uid-1', generation: 3 },
    spec: multiplexedDeploymentSpecSchema.parse({
      routePrefix: '/wine',
      modelSource: { uri: 's3://models/wine', endpoint: 'http://s3.local:9000', credentialsSecret: 's3-creds' },
      replicas: 3,
      resources: { limits: { 'nvidia.com/gpu': 1, memory: '8Gi' } },
      ...spec,
    }),
  };
}

/** The same, autoscaled, so that a reconcile applies an HPA too. */
export const autoscaledResource = (spec: Partial<MultiplexedDeploymentSpecInput> = {}): StoredMultiplexedDeployment =>
  storedResource({ autoscaling: { minReplicas: 1, maxReplicas: 3, targetOngoingRequests: 2.5 }, ...spec });

/** Everything a reconcile of `mxd` applies, in the reconciler's order. */
export function appliedObjects(mxd: StoredMultiplexedDeployment): readonly KubernetesObject[] {
  return desiredState(mxd, { defaultImage: 'img' }).objects;
}
