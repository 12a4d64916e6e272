import type { ObjectReader } from './caches.js';
import type { ObjectWriter } from './kube-writer.js';
import type { ReconcileResult } from './reconciler.js';
import { computeRouteStatuses, routeStatusChanged } from './route-status.js';

export interface RouteReconcilerDeps {
  cache: ObjectReader;
  writer: Pick<ObjectWriter, 'patchRouteStatus'>;
  now: () => Date;
}

/**
 * Writes the status of every ModelRoute of `namespace` that the caches show out of date.
 * Level-triggered like the pool's reconcile: whatever event woke it, it recomputes them all
 * from the caches, and writes only what changed. A write failing throws, and the queue retries.
 */
export async function reconcileRoutes(deps: RouteReconcilerDeps, namespace: string): Promise<ReconcileResult> {
  const stored = deps.cache.modelRoutes(namespace);
  const desired = computeRouteStatuses(stored, (pool) => deps.cache.multiplexedDeployment(namespace, pool) !== undefined, deps.now());
  for (const route of stored) {
    const name = route.metadata?.name;
    const status = name === undefined ? undefined : desired.get(name);
    if (name !== undefined && status !== undefined && routeStatusChanged(route.status, status)) await deps.writer.patchRouteStatus(namespace, name, status);
  }
  return {};
}
