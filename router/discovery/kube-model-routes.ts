import { CustomObjectsApi, KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { customObjectsPath, KubeInformer, listCustomObjects } from '../../common/kube-informer.js';
import type { Logger } from '../../common/log.js';
import { ROUTE_PLURAL, parseModelRoute, type ModelRoute } from '../../common/model-route.js';
import type { RoutesByPool } from '../routes/route-file.js';

/** Changes within this window produce one update: `kubectl apply -f` of many routes at once. */
const COALESCE_MS = 20;

/** The pool key of a MultiplexedDeployment in kube mode (RouteState.pool). */
export function kubePoolKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** Parsed routes by namespace/name, with the resourceVersion they were parsed at. */
export type ParsedRoutes = Map<string, { resourceVersion: string | undefined; route: ModelRoute | undefined }>;

/**
 * ModelRoutes as the informer holds them, by the pool key of their deploymentRef (a pool in the
 * route's own namespace). A route whose spec does not parse is skipped with a warning:
 * admission refuses most, and the operator's status says why for the rest. `parsed` keeps each
 * route parsed at its resourceVersion, so a change of one route among thousands parses one, and
 * the unchanged routes keep their identity (route-table.ts then keeps their pools' indexes).
 */
export function routesByPool(objects: readonly KubernetesObject[], log: Logger, parsed: ParsedRoutes = new Map()): RoutesByPool {
  const out: RoutesByPool = new Map();
  const seen = new Set<string>();
  for (const obj of objects) {
    const namespace = obj.metadata?.namespace ?? '';
    const id = `${namespace}/${obj.metadata?.name ?? ''}`;
    const resourceVersion = obj.metadata?.resourceVersion;
    seen.add(id);
    let cached = parsed.get(id);
    if (cached === undefined || resourceVersion === undefined || cached.resourceVersion !== resourceVersion) {
      const r = parseModelRoute(obj);
      if (!r.ok) log.warn('skipping ModelRoute with an invalid spec', { route: id, problem: r.message });
      cached = { resourceVersion, route: r.ok ? r.route : undefined };
      parsed.set(id, cached);
    }
    if (cached.route === undefined) continue;
    const key = kubePoolKey(namespace, cached.route.spec.deploymentRef.name);
    const list = out.get(key);
    if (list === undefined) out.set(key, [cached.route]);
    else list.push(cached.route);
  }
  for (const id of parsed.keys()) if (!seen.has(id)) parsed.delete(id);
  return out;
}

/**
 * An informer on ModelRoutes (across namespaces, or in `namespace`), as kube-discovery.ts
 * watches pools (common/kube-informer.ts): relisted on 410 Gone, restarted after an error, the
 * routes published once listed and at every change after. Routes never hold up the
 * router's readiness: without the CRD or the right to list them, requests for plain models are
 * served and the watch keeps retrying.
 */
export class KubeRoutes {
  private informer: KubeInformer<KubernetesObject> | undefined;
  private stopped = false;
  private pending: NodeJS.Timeout | undefined;
  private readonly parsed: ParsedRoutes = new Map();

  constructor(
    private readonly namespace: string | undefined,
    private readonly log: Logger,
  ) {}

  start(onUpdate: (routes: RoutesByPool) => void): void {
    const kc = new KubeConfig();
    kc.loadFromDefault();
    const custom = kc.makeApiClient(CustomObjectsApi);
    const ns = this.namespace;
    const inf = new KubeInformer<KubernetesObject>(kc, { name: 'ModelRoutes', path: customObjectsPath(ROUTE_PLURAL, ns), list: () => listCustomObjects(custom, ROUTE_PLURAL, ns) }, { log: this.log });
    const emit = (): void => {
      if (this.pending || this.stopped) return;
      this.pending = setTimeout(() => {
        this.pending = undefined;
        if (!this.stopped) onUpdate(routesByPool(inf.list(), this.log, this.parsed));
      }, COALESCE_MS);
    };
    inf.onChange(emit);
    // A namespace without routes has no change to report: its (empty) list is news too.
    void inf.synced.then(emit);
    this.informer = inf;
    inf.start();
  }

  stop(): void {
    this.stopped = true;
    if (this.pending) clearTimeout(this.pending);
    this.informer?.stop();
  }
}
