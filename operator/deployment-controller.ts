import type { KubernetesObject } from '@kubernetes/client-node';
import type { ChangeType } from '../common/kube-informer.js';
import type { Logger } from '../common/log.js';
import { ApplyRecords } from './apply-records.js';
import type { ObjectReader, WatchedGroup } from './caches.js';
import { ChangeFilter, specFingerprint } from './change-filter.js';
import type { ControllerSpec } from './controller.js';
import { controllerKey, ownKey, podFingerprint, podKey, splitResourceKey, type ResourceKey } from './event-keys.js';
import type { EventSink } from './events.js';
import type { ObjectWriter } from './kube-writer.js';
import { reconcile } from './reconciler.js';
import type { DeploymentOptions } from './resources/deployment.js';

export interface DeploymentControllerDeps {
  cache: ObjectReader;
  /** Resolves once the caches of the resources, what they own and their pods hold complete lists. */
  synced: () => Promise<void>;
  writer: ObjectWriter;
  events: EventSink;
  options: DeploymentOptions;
  log: Logger;
  now: () => Date;
}

/**
 * The MultiplexedDeployment controller: a resource's key wakes on a change of its spec or
 * metadata (not of its status: the operator's own status writes would wake it again), of the
 * replica Deployment (whose status becomes the resource's), of any other owned object other
 * than in its status, and of a replica pod's phase, IP, conditions or deletion (not of its
 * model-table annotation). Its reconcile applies the owned objects only when the caches show a
 * change that needs it (apply-records.ts).
 */
export function deploymentController(deps: DeploymentControllerDeps): ControllerSpec<ResourceKey> {
  const resources = new ChangeFilter(specFingerprint);
  const owned = new ChangeFilter(specFingerprint);
  const pods = new ChangeFilter(podFingerprint);
  const applied = new ApplyRecords();
  const one = (key: ResourceKey | undefined): readonly ResourceKey[] => (key === undefined ? [] : [key]);
  return {
    name: 'multiplexeddeployment',
    keysFor(group: WatchedGroup, type: ChangeType, obj: KubernetesObject): readonly ResourceKey[] {
      switch (group) {
        case 'resources':
          return resources.passes(type, obj) ? one(ownKey(obj)) : [];
        case 'deployments':
          return one(controllerKey(obj));
        case 'owned':
          return owned.passes(type, obj) ? one(controllerKey(obj)) : [];
        case 'pods':
          return pods.passes(type, obj) ? one(podKey(obj)) : [];
        case 'routes':
          return [];
      }
    },
    allKeys: () => deps.cache.multiplexedDeployments().flatMap((r) => one(ownKey(r))),
    synced: deps.synced,
    reconcile(key: ResourceKey) {
      const { namespace, name } = splitResourceKey(key);
      return reconcile({ ...deps, applied, log: deps.log.child({ key }) }, namespace, name);
    },
    // A new leadership term, or a resync: apply everything once, to repair drift no watch reported.
    resync: () => applied.clear(),
  };
}
