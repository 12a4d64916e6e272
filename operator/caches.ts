import type { KubeConfig, KubernetesObject, KubernetesObjectApi, V1Deployment, V1HorizontalPodAutoscaler, V1Pod } from '@kubernetes/client-node';
import { collectionPath, KubeInformer, type ChangeType, type InformerHooks } from '../common/kube-informer.js';
import { ROUTE_KIND, ROUTE_PLURAL } from '../common/model-route.js';
import { API_GROUP, API_VERSION, KIND, LABEL_DEPLOYMENT, LABEL_MANAGED_BY, PLURAL } from '../common/names.js';
import type { MultiplexedDeployment } from '../common/resource.js';
import { MANAGED_BY } from './resources/meta.js';
import type { StoredRoute } from './route-status.js';

/** A MultiplexedDeployment as the API server stores it; its spec is still to be validated. */
export type StoredResource = MultiplexedDeployment & { metadata: { deletionTimestamp?: string | Date } };

/** What a reconcile reads: the informers' caches, never the API server. */
export interface ObjectReader {
  multiplexedDeployment(namespace: string, name: string): StoredResource | undefined;
  /** Every MultiplexedDeployment: what a controller starting or resyncing enqueues. */
  multiplexedDeployments(): readonly StoredResource[];
  deployment(namespace: string, name: string): V1Deployment | undefined;
  horizontalPodAutoscaler(namespace: string, name: string): V1HorizontalPodAutoscaler | undefined;
  /** The cached copy of an object the operator applies, found by the apiVersion, kind, namespace and name of its desired form. */
  owned(obj: KubernetesObject): KubernetesObject | undefined;
  /** Pods labelled as replicas of the resource `name` (the label the router selects on too). */
  replicaPods(namespace: string, name: string): readonly V1Pod[];
  /** The ModelRoutes of a namespace (of every namespace without one), as stored. */
  modelRoutes(namespace?: string): readonly StoredRoute[];
}

/**
 * What the informers report, by what an event of it means to the controllers: `resources` are
 * MultiplexedDeployments, `deployments` their replica Deployments (whose status is theirs),
 * `owned` every other kind the operator applies.
 */
export type WatchedGroup = 'resources' | 'deployments' | 'owned' | 'pods' | 'routes';

export type ChangeHandler = (group: WatchedGroup, type: ChangeType, obj: KubernetesObject) => void;

interface Kind {
  name: string;
  apiVersion: string;
  kind: string;
  group: WatchedGroup;
  labelSelector?: string;
}

const OWNED_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;

const RESOURCES: Kind = { name: PLURAL, apiVersion: `${API_GROUP}/${API_VERSION}`, kind: KIND, group: 'resources' };
const owned = (name: string, apiVersion: string, kind: string, group: WatchedGroup = 'owned'): Kind => ({ name, apiVersion, kind, group, labelSelector: OWNED_SELECTOR });
const DEPLOYMENTS = owned('deployments', 'apps/v1', 'Deployment', 'deployments');
const HPAS = owned('horizontalpodautoscalers', 'autoscaling/v2', 'HorizontalPodAutoscaler');
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

const kindKey = (apiVersion: string | undefined, kind: string | undefined): string => `${apiVersion ?? ''} ${kind ?? ''}`;

export interface CacheHooks extends Omit<InformerHooks, 'onRestart'> {
  /** An informer of this kind (its plural) stopped on an error and is being started again. */
  onRestart: (resource: string) => void;
}

/**
 * One informer per watched kind, in `namespace` or across all, shared by both controllers
 * (controller-runtime's cache). It runs from the process's start, on a standby too, so a new
 * leader acts on warm caches; reconciles read it, what they write goes to the API server.
 */
export class OperatorCaches implements ObjectReader {
  private readonly byKind = new Map<string, KubeInformer<KubernetesObject>>();
  private readonly handlers: ChangeHandler[] = [];
  private readonly mxds: KubeInformer<KubernetesObject>;
  private readonly deployments: KubeInformer<V1Deployment>;
  private readonly hpas: KubeInformer<V1HorizontalPodAutoscaler>;
  private readonly pods: KubeInformer<V1Pod>;
  private readonly routes: KubeInformer<KubernetesObject>;

  constructor(kc: KubeConfig, objects: KubernetesObjectApi, namespace: string | undefined, hooks: CacheHooks) {
    const make = <T extends KubernetesObject>(k: Kind): KubeInformer<T> => {
      const informer = new KubeInformer<T>(
        kc,
        {
          name: k.name,
          path: collectionPath(k.apiVersion, k.name, namespace),
          list: () => objects.list<T>(k.apiVersion, k.kind, namespace, undefined, undefined, undefined, undefined, k.labelSelector),
          ...(k.labelSelector !== undefined ? { labelSelector: k.labelSelector } : {}),
        },
        { ...hooks, onRestart: () => hooks.onRestart(k.name) },
      );
      informer.onChange((type, obj) => {
        for (const h of this.handlers) h(k.group, type, obj);
      });
      this.byKind.set(kindKey(k.apiVersion, k.kind), informer);
      return informer;
    };
    this.mxds = make(RESOURCES);
    this.deployments = make<V1Deployment>(DEPLOYMENTS);
    this.hpas = make<V1HorizontalPodAutoscaler>(HPAS);
    for (const k of OTHER_OWNED) make(k);
    this.pods = make<V1Pod>(PODS);
    this.routes = make(ROUTES);
  }

  /** Every change any informer sees goes to `handler`, whether this process leads or not. */
  onChange(handler: ChangeHandler): void {
    this.handlers.push(handler);
  }

  start(): void {
    for (const i of this.byKind.values()) i.start();
  }

  stop(): void {
    for (const i of this.byKind.values()) i.stop();
  }

  /**
   * Resolves once the caches of `groups` hold a complete list. The ModelRoutes' cache is never
   * waited for: a cluster upgraded by `helm upgrade` (which installs no new CRD) has no
   * ModelRoute kind, and its informer retries with backoff while pools reconcile. A route's
   * status is computed from a complete list or not at all: before its list the cache is empty.
   */
  async synced(groups: readonly Exclude<WatchedGroup, 'routes'>[]): Promise<void> {
    await Promise.all(WATCHED_KINDS.filter((k) => (groups as readonly WatchedGroup[]).includes(k.group)).map((k) => this.byKind.get(kindKey(k.apiVersion, k.kind))?.synced ?? Promise.resolve()));
  }

  multiplexedDeployments(): readonly StoredResource[] {
    return this.mxds.list() as readonly StoredResource[];
  }

  modelRoutes(namespace?: string): readonly StoredRoute[] {
    return this.routes.list(namespace);
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

  owned(obj: KubernetesObject): KubernetesObject | undefined {
    const name = obj.metadata?.name;
    return name === undefined ? undefined : this.byKind.get(kindKey(obj.apiVersion, obj.kind))?.get(name, obj.metadata?.namespace);
  }

  replicaPods(namespace: string, name: string): readonly V1Pod[] {
    return this.pods.list(namespace).filter((p) => p.metadata?.labels?.[LABEL_DEPLOYMENT] === name);
  }
}
