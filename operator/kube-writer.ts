import { PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION, PLURAL } from '../common/names.js';
import { ROUTE_PLURAL, type ModelRouteStatus } from '../common/model-route.js';
import type { MultiplexedDeploymentStatus } from '../common/resource.js';
import { apiStatus } from '../common/kube-api-errors.js';
import type { ApiClients } from './api-clients.js';
import { FIELD_MANAGER } from './resources/meta.js';

/** What a reconcile writes. Every call goes to the API server; reads come from the caches. */
export interface ObjectWriter {
  /** Server-side apply: creates or converges the fields this operator manages, in one call; resolves with the stored object. */
  apply<T extends KubernetesObject>(obj: T): Promise<T>;
  /** Deletes (the garbage collector takes what it owned); an object already gone is not an error. */
  delete(obj: KubernetesObject): Promise<void>;
  create(obj: KubernetesObject): Promise<void>;
  /** Merge-patches a resource's status subresource; a resource deleted meanwhile is not an error. */
  patchStatus(namespace: string, name: string, status: MultiplexedDeploymentStatus): Promise<void>;
  /** The same for a ModelRoute. */
  patchRouteStatus(namespace: string, name: string, status: ModelRouteStatus): Promise<void>;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * The writes through client-node: KubernetesObjectApi's server-side apply (field manager
 * modelmux-operator, forced) so that one call creates or converges and leaves alone the fields
 * others own (the HPA's replicas, a user's extra labels); an apply that changes nothing does not
 * bump the resourceVersion, so resyncs are cheap. Status goes through CustomObjectsApi's
 * status subresource, which KubernetesObjectApi does not reach.
 */
export class KubeWriter implements ObjectWriter {
  constructor(private readonly clients: ApiClients) {}

  apply<T extends KubernetesObject>(obj: T): Promise<T> {
    return this.clients.objects.patch(obj, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  }

  async delete(obj: KubernetesObject): Promise<void> {
    try {
      await this.clients.objects.delete(obj, undefined, undefined, undefined, undefined, 'Background');
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
  }

  async create(obj: KubernetesObject): Promise<void> {
    await this.clients.objects.create(obj);
  }

  patchStatus(namespace: string, name: string, status: MultiplexedDeploymentStatus): Promise<void> {
    return this.patchStatusOf(PLURAL, namespace, name, status);
  }

  patchRouteStatus(namespace: string, name: string, status: ModelRouteStatus): Promise<void> {
    return this.patchStatusOf(ROUTE_PLURAL, namespace, name, status);
  }

  private async patchStatusOf(plural: string, namespace: string, name: string, status: object): Promise<void> {
    try {
      await this.clients.custom.patchNamespacedCustomObjectStatus({ group: API_GROUP, version: API_VERSION, namespace, plural, name, body: { status } }, mergePatch);
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
  }
}
