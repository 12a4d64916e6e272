import type { KubernetesObject } from '@kubernetes/client-node';
import { API_GROUP, KIND, LABEL_DEPLOYMENT } from '../common/names.js';

/**
 * Which MultiplexedDeployment an event concerns, as a work-queue key "namespace/name".
 * Pure: the informers' handlers call these and enqueue; reconcile then reads everything itself.
 */

export function keyFor(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

/**
 * The key of every ModelRoute of a namespace: their statuses are computed together (name
 * conflicts, cycles). ':' is in no object name, so it never meets a MultiplexedDeployment's key.
 */
export const ROUTES_KEY_NAME = ':routes';

export function routesKey(namespace: string): string {
  return keyFor(namespace, ROUTES_KEY_NAME);
}

export function ownKey(obj: KubernetesObject): string | undefined {
  const m = obj.metadata;
  return m?.namespace !== undefined && m.name !== undefined ? keyFor(m.namespace, m.name) : undefined;
}

/** The controlling MultiplexedDeployment of an owned object. */
export function controllerKey(obj: KubernetesObject): string | undefined {
  const ns = obj.metadata?.namespace;
  const ref = obj.metadata?.ownerReferences?.find((r) => r.controller === true && r.kind === KIND && r.apiVersion.startsWith(`${API_GROUP}/`));
  return ns !== undefined && ref !== undefined ? keyFor(ns, ref.name) : undefined;
}

/** A replica pod's resource, from the label the router also selects on. */
export function podKey(pod: KubernetesObject): string | undefined {
  const ns = pod.metadata?.namespace;
  const name = pod.metadata?.labels?.[LABEL_DEPLOYMENT];
  return ns !== undefined && name !== undefined ? keyFor(ns, name) : undefined;
}

interface PodStatusFields {
  phase?: string;
  podIP?: string;
  conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
}

/**
 * What of a pod can change the resource's status. Replicas rewrite their model-table
 * annotation on every load and eviction; those updates must not each cost a reconcile.
 */
export function podFingerprint(pod: KubernetesObject & { status?: unknown }): string {
  const s = (pod.status ?? {}) as PodStatusFields;
  const conditions = (s.conditions ?? []).map((c) => `${c.type ?? ''}=${c.status ?? ''}:${c.reason ?? ''}:${c.message ?? ''}`).sort();
  return JSON.stringify([s.phase ?? '', s.podIP ?? '', conditions, pod.metadata?.deletionTimestamp !== undefined]);
}
