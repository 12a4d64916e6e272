import type { KubeConfig, KubernetesObject, KubernetesObjectApi, V1Deployment, V1HorizontalPodAutoscaler, V1Pod } from '@kubernetes/client-node';
import { ROUTE_KIND, ROUTE_PLURAL } from '../common/model-route.js';
import { API_GROUP, API_VERSION, KIND, LABEL_DEPLOYMENT, LABEL_MANAGED_BY, PLURAL } from '../common/names.js';
import type { MultiplexedDeployment } from '../common/resource.js';
import { Informer, type ChangeType, type InformerDeps } from './informer.js';
import { MANAGED_BY } from './resources/meta.js';
import type { StoredRoute } from './route-status.js';

/** A MultiplexedDeployment as the API server stores it; its spec is still to be validated. */
export type StoredResource = MultiplexedDeployment & { metadata: { deletionTimestamp?: string | Date } };

/** What a reconcile reads: the informers' caches, never the API server. */
export interface ObjectReader {
  multiplexedDeployment(namespace: string, name: string): StoredResource | undefined;
  deployment(namespace: string, name: string): V1Deployment | undefined;
  horizontalPodAutoscaler(namespace: string, name: string): V1HorizontalPodAutoscaler | undefined;
  /** Pods labelled as replicas of the resource `name` (the label the router selects on too). */
  replicaPods(namespace: string, name: string): readonly V1Pod[];
  /** Every ModelRoute of the namespace, as stored. */
  modelRoutes(namespace: string): readonly StoredRoute[];
}

/** What the informers report: `resources` are MultiplexedDeployments, `owned` anything the operator applies. */
export type WatchedGroup = 'resources' | 'owned' | 'pods' | 'routes';

interface Kind {
  name: string;
  apiVersion: string;
  kind: string;
  group: WatchedGroup;
  labelSelector?: string;
}

const OWNED_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;

const RESOURCES: Kind = { name: PLURAL, apiVersion: `${API_GROUP}/${API_VERSION}`, kind: KIND, group: 'resources' };
const owned = (name: string, apiVersion: string, kind: string): Kind => ({ name, apiVersion, kind, group: 'owned', labelSelector: OWNED_SELECTOR });
const DEPLOYMENTS = owned('deployments', 'apps/v1', 'Deployment');
const HPAS = owned('horizontalpodautoscalers', 'autoscaling/v2', 'HorizontalPodAutoscaler');
/** Owned kinds the reconcile never reads: watched so that their drift wakes their owner's reconcile. */
const OTHER_OWNED: readonly Kind[] = [
  owned('services', 'v1', 'Service'),
  owned('serviceaccounts', 'v1', 'ServiceAccount'),
  owned('roles', 'rbac.authorization.k8s.io/v1', 'Role'),
  owned('rolebindings', 'rbac.authorization.k8s.io/v1', 'RoleBinding'),
];
const PODS: Kind = { name: 'pods', apiVersion: 'v1', kind: 'Pod', group: 'pods', labelSelector: LABEL_DEPLOYMENT };
const ROUTES: Kind = { name: ROUTE_PLURAL, apiVersion: `${API_GROUP}/${API_VERSION}`, kind: ROUTE_KIND, group: 'routes' };

/** Every kind the operator watches: its resources, each kind it owns, the replica pods and the ModelRoutes. */
export const WATCHED_KINDS: readonly Kind[] = [RESOURCES, DEPLOYMENTS, HPAS, ...OTHER_OWNED, PODS, ROUTES];

/** The collection path of a kind, e.g. /apis/apps/v1/namespaces/ml/deployments, or across namespaces without one. */
function collectionPath(apiVersion: string, plural: string, namespace?: string): string {
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  return `${base}${namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : ''}/${plural}`;
}

export interface CacheDeps extends Omit<InformerDeps, 'onRestart'> {
  /** An informer of this kind (its plural) stopped on an error and is being started again. */
  onRestart: (resource: string) => void;
}

/**
 * One informer per watched kind, in `namespace` or across all. Reconciles read these caches
 * (controller-runtime's shape); what they write still goes to the API server.
 */
export class OperatorCaches implements ObjectReader {
  private readonly all: Informer<KubernetesObject>[] = [];
  private readonly mxds: Informer<KubernetesObject>;
  private readonly deployments: Informer<V1Deployment>;
  private readonly hpas: Informer<V1HorizontalPodAutoscaler>;
  private readonly pods: Informer<V1Pod>;
  private readonly routes: Informer<KubernetesObject>;

  constructor(
    kc: KubeConfig,
    objects: KubernetesObjectApi,
    namespace: string | undefined,
    onChange: (group: WatchedGroup, type: ChangeType, obj: KubernetesObject) => void,
    deps: CacheDeps,
  ) {
    const make = <T extends KubernetesObject>(k: Kind): Informer<T> => {
      const target = {
        name: k.name,
        path: collectionPath(k.apiVersion, k.name, namespace),
        list: () => objects.list<T>(k.apiVersion, k.kind, namespace, undefined, undefined, undefined, undefined, k.labelSelector),
        ...(k.labelSelector !== undefined ? { labelSelector: k.labelSelector } : {}),
      };
      const informer = new Informer<T>(kc, target, (type, obj) => onChange(k.group, type, obj), { ...deps, onRestart: () => deps.onRestart(k.name) });
      this.all.push(informer);
      return informer;
    };
    this.mxds = make(RESOURCES);
    this.deployments = make<V1Deployment>(DEPLOYMENTS);
    this.hpas = make<V1HorizontalPodAutoscaler>(HPAS);
    for (const k of OTHER_OWNED) make(k);
    this.pods = make<V1Pod>(PODS);
    this.routes = make(ROUTES);
  }

  start(): void {
    for (const i of this.all) i.start();
  }

  stop(): void {
    for (const i of this.all) i.stop();
  }

  /**
   * Resolves once every cache but the ModelRoutes' holds a complete list. Routes do not hold up
   * the pools: a cluster upgraded by `helm upgrade` (which installs no new CRD) has no ModelRoute
   * kind, and its informer retries with backoff while pools reconcile. A route's status is
   * computed from a complete list or not at all: before its list the cache is empty.
   */
  async synced(): Promise<void> {
    await Promise.all(this.all.filter((i) => i !== this.routes).map((i) => i.synced));
  }

  /** Every MultiplexedDeployment in the cache: the periodic resync enqueues them all. */
  resources(): readonly KubernetesObject[] {
    return this.mxds.list();
  }

  /** Namespaces holding a ModelRoute: the periodic resync looks at their routes' status too. */
  routeNamespaces(): Set<string> {
    return new Set(this.routes.list().flatMap((r) => (r.metadata?.namespace !== undefined ? [r.metadata.namespace] : [])));
  }

  modelRoutes(namespace: string): readonly StoredRoute[] {
    return this.routes.list(namespace) as readonly StoredRoute[];
  }

  multiplexedDeployment(namespace: string, name: string): StoredResource | undefined {
    // As the API server stored it: the reconcile validates the spec before it uses it.
    return this.mxds.get(name, namespace) as StoredResource | undefined;
  }

  deployment(namespace: string, name: string): V1Deployment | undefined {
    return this.deployments.get(name, namespace);
  }

  horizontalPodAutoscaler(namespace: string, name: string): V1HorizontalPodAutoscaler | undefined {
    return this.hpas.get(name, namespace);
  }

  replicaPods(namespace: string, name: string): readonly V1Pod[] {
    return this.pods.list(namespace).filter((p) => p.metadata?.labels?.[LABEL_DEPLOYMENT] === name);
  }
}
