import type { KubernetesObject } from '@kubernetes/client-node';
import type { ChangeType } from '../common/kube-informer.js';
import type { ObjectReader, WatchedGroup } from './caches.js';
import { ChangeFilter, specFingerprint } from './change-filter.js';
import type { ControllerSpec } from './controller.js';
import { namespaceKey, type RouteNamespaceKey } from './event-keys.js';
import type { ObjectWriter } from './kube-writer.js';
import { reconcileRoutes } from './route-reconciler.js';

export interface RouteControllerDeps {
  cache: ObjectReader;
  /** Resolves once the MultiplexedDeployments' cache holds a complete list (ResolvedRefs reads it). */
  synced: () => Promise<void>;
  writer: Pick<ObjectWriter, 'patchRouteStatus'>;
  now: () => Date;
}

/**
 * The ModelRoute controller, on its own queue of namespaces: a namespace wakes when one of its
 * routes changes other than in its status (its own status writes would wake it again), and when
 * a MultiplexedDeployment appears in it or goes (a route's ResolvedRefs says whether its pool
 * exists). Nothing here waits on, or is held up by, the MultiplexedDeployment controller.
 */
export function routeController(deps: RouteControllerDeps): ControllerSpec<RouteNamespaceKey> {
  const routes = new ChangeFilter(specFingerprint);
  const one = (key: RouteNamespaceKey | undefined): readonly RouteNamespaceKey[] => (key === undefined ? [] : [key]);
  return {
    name: 'modelroute',
    keysFor(group: WatchedGroup, type: ChangeType, obj: KubernetesObject): readonly RouteNamespaceKey[] {
      if (group === 'routes') return routes.passes(type, obj) ? one(namespaceKey(obj)) : [];
      if (group === 'resources' && type !== 'update') return one(namespaceKey(obj));
      return [];
    },
    allKeys: () => new Set(deps.cache.modelRoutes().flatMap((r) => one(namespaceKey(r)))),
    synced: deps.synced,
    reconcile: (namespace: RouteNamespaceKey) => reconcileRoutes(deps, namespace),
  };
}
