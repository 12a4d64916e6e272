import type { V1ObjectMeta, V1OwnerReference } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION, KIND, LABEL_COMPONENT, LABEL_DEPLOYMENT, LABEL_MANAGED_BY, LABEL_NAME } from '../../common/names.js';
import type { MultiplexedDeployment } from '../../common/resource.js';

/** The value of LABEL_MANAGED_BY on everything the operator creates; its watches select on it. */
export const MANAGED_BY = 'modelmux-operator';
/** Server-side apply field manager: the operator owns exactly the fields it sets. */
export const FIELD_MANAGER = 'modelmux-operator';

/** A resource the operator can build for: it has been stored, so it has a uid. */
export type StoredMultiplexedDeployment = MultiplexedDeployment & { metadata: { uid: string } };

/** The labels the router selects replica pods by, and the Deployment's immutable selector. */
export function selectorLabels(mxd: MultiplexedDeployment): Record<string, string> {
  return { [LABEL_DEPLOYMENT]: mxd.metadata.name };
}

/** The scale subresource's selector string, for the HPA and `kubectl scale`. */
export function selectorString(mxd: MultiplexedDeployment): string {
  return Object.entries(selectorLabels(mxd))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

export function commonLabels(mxd: MultiplexedDeployment): Record<string, string> {
  return { ...selectorLabels(mxd), [LABEL_NAME]: 'modelmux', [LABEL_COMPONENT]: 'replica', [LABEL_MANAGED_BY]: MANAGED_BY };
}

/** controller=true lets the garbage collector delete the object with its resource. */
export function ownerReference(mxd: StoredMultiplexedDeployment): V1OwnerReference {
  return {
    apiVersion: `${API_GROUP}/${API_VERSION}`,
    kind: KIND,
    name: mxd.metadata.name,
    uid: mxd.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function ownedMeta(mxd: StoredMultiplexedDeployment, name: string): V1ObjectMeta {
  return { name, namespace: mxd.metadata.namespace, labels: commonLabels(mxd), ownerReferences: [ownerReference(mxd)] };
}

/** Names of the owned objects. The ServiceAccount gets a suffix so it never shadows a user's. */
export function ownedNames(mxd: MultiplexedDeployment): { deployment: string; service: string; serviceAccount: string; role: string; roleBinding: string; hpa: string } {
  const n = mxd.metadata.name;
  return { deployment: n, service: n, serviceAccount: `${n}-replica`, role: `${n}-replica`, roleBinding: `${n}-replica`, hpa: n };
}
