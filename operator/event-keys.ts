import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { API_GROUP, KIND, LABEL_DEPLOYMENT } from '../common/names.js';
import { startRefusal } from './start-refusal.js';

/**
 * The work-queue keys of the two controllers, and which key an event concerns. Pure: the
 * informers' handlers call these and enqueue; reconcile then reads everything itself.
 */

/** The MultiplexedDeployment controller's key: "namespace/name" of one resource. */
export type ResourceKey = string & { readonly __key: 'MultiplexedDeployment' };

/**
 * The ModelRoute controller's key: a namespace. The statuses of its routes are computed
 * together (name conflicts, cycles), so one reconcile takes them all.
 */
export type RouteNamespaceKey = string & { readonly __key: 'ModelRouteNamespace' };

export function resourceKey(namespace: string, name: string): ResourceKey {
  return `${namespace}/${name}` as ResourceKey;
}

export function splitResourceKey(key: ResourceKey): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export function ownKey(obj: { metadata?: { namespace?: string; name?: string } }): ResourceKey | undefined {
  const m = obj.metadata;
  return m?.namespace !== undefined && m.name !== undefined ? resourceKey(m.namespace, m.name) : undefined;
}

/** The controlling MultiplexedDeployment of an owned object. */
export function controllerKey(obj: KubernetesObject): ResourceKey | undefined {
  const ns = obj.metadata?.namespace;
  const ref = obj.metadata?.ownerReferences?.find((r) => r.controller === true && r.kind === KIND && r.apiVersion.startsWith(`${API_GROUP}/`));
  return ns !== undefined && ref !== undefined ? resourceKey(ns, ref.name) : undefined;
}

/** A replica pod's resource, from the label the router also selects on. */
export function podKey(pod: KubernetesObject): ResourceKey | undefined {
  const ns = pod.metadata?.namespace;
  const name = pod.metadata?.labels?.[LABEL_DEPLOYMENT];
  return ns !== undefined && name !== undefined ? resourceKey(ns, name) : undefined;
}

/** The namespace of a ModelRoute or of the pool it names, as the route controller's key. */
export function namespaceKey(obj: { metadata?: { namespace?: string } }): RouteNamespaceKey | undefined {
  return obj.metadata?.namespace as RouteNamespaceKey | undefined;
}

interface PodStatusFields {
  phase?: string;
  podIP?: string;
  conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
}

/**
 * What of a pod can change the resource's status. Replicas rewrite their model-table
 * annotation on every load and eviction; those updates must not each cost a reconcile. A replica
 * refusing to start changes no pod condition (it was never ready), so its refusal is counted.
 */
export function podFingerprint(pod: KubernetesObject & { status?: unknown }): string {
  const s = (pod.status ?? {}) as PodStatusFields;
  const conditions = (s.conditions ?? []).map((c) => `${c.type ?? ''}=${c.status ?? ''}:${c.reason ?? ''}:${c.message ?? ''}`).sort();
  return JSON.stringify([s.phase ?? '', s.podIP ?? '', conditions, pod.metadata?.deletionTimestamp !== undefined, startRefusal(pod as V1Pod) ?? '']);
}
