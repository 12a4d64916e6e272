import type { CustomObjectsApi, Informer, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../common/log.js';
import { API_GROUP, API_VERSION } from '../common/names.js';

/** How long a dead watch waits before it is started again. */
export const WATCH_RESTART_MS = 1000;

/** The watch path of a modelmux.io resource, in one namespace or ('' or undefined) all of them. */
export function customObjectsPath(plural: string, namespace: string | undefined): string {
  return namespace ? `/apis/${API_GROUP}/${API_VERSION}/namespaces/${namespace}/${plural}` : `/apis/${API_GROUP}/${API_VERSION}/${plural}`;
}

/** The list an informer of customObjectsPath(plural, namespace) starts from. */
export function listCustomObjects<T extends KubernetesObject>(
  custom: CustomObjectsApi,
  plural: string,
  namespace: string | undefined,
): Promise<{ items: T[]; metadata?: { resourceVersion?: string } }> {
  return (
    namespace
      ? custom.listNamespacedCustomObject({ group: API_GROUP, version: API_VERSION, namespace, plural })
      : custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural })
  ) as Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>;
}

/**
 * Starts `inf` again WATCH_RESTART_MS after its watch (or its first list) fails, for as long as
 * its owner has not stopped: client-node's informer stops on an error, and a router must outlive
 * an API server restart rather than serve a frozen table.
 */
export function restartOnError(inf: Informer<KubernetesObject>, watch: string, log: Logger, stopped: () => boolean): void {
  inf.on('error', (err: unknown) => {
    if (stopped()) return;
    log.warn('watch failed; restarting', { watch, reason: err instanceof Error ? err.message : String(err) });
    setTimeout(() => {
      if (!stopped()) inf.start().catch((e: unknown) => log.warn('watch restart failed', { watch, reason: String(e) }));
    }, WATCH_RESTART_MS).unref();
  });
}
