import { CoreV1Api, CustomObjectsApi, KubeConfig, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { systemClock } from '../../common/clock.js';
import { customObjectsPath, KubeInformer, listCustomObjects } from '../../common/kube-informer.js';
import type { Logger } from '../../common/log.js';
import type { ModelTable } from '../../common/model-table.js';
import { GRPC_PORT_NAME, LABEL_DEPLOYMENT, MODELS_ANNOTATION, PLURAL } from '../../common/names.js';
import { REPLICA_PORT } from '../../common/replica-env.js';
import { multiplexedDeploymentSpecSchema } from '../../common/resource.js';
import { parseTableAnnotation } from '../../common/table-annotation.js';
import { systemSetTimer } from '../placement/balancer.js';
import type { Discovery, ReplicaEndpoint, RouteState } from './discovery.js';
import { kubePoolKey } from './kube-model-routes.js';
import { ReplicaTables } from './replica-tables.js';
import { readModelTable } from './table-reader.js';

/** How long a failed table fetch waits before its first retry (it backs off from there). */
const TABLE_RETRY_MS = 1000;
/** Events within this window produce one snapshot: a rollout changes many pods at once. */
const COALESCE_MS = 20;
/** Exact tables read from replicas (compact annotations, ADR 0029): at once, and per try. */
const TABLE_FETCHES = 4;
const TABLE_FETCH_TIMEOUT_MS = 2000;
/** A table reaches the balancer within a publication interval plus this (watch, fetch, coalescing). */
const TABLE_LAG_MARGIN_MS = 1000;

interface MxdObject extends KubernetesObject {
  spec?: unknown;
}

/** Whether the pod takes traffic: running, Ready, with an IP, not being deleted. */
export function podIsReady(pod: V1Pod): boolean {
  if (pod.metadata?.deletionTimestamp !== undefined || !pod.status?.podIP || pod.status.phase !== 'Running') return false;
  return (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

/** `podIP:port` of the pod's container port named `grpc`, when it has one (operator/resources/deployment.ts). */
export function podGrpcAddress(pod: V1Pod): string | undefined {
  const ip = pod.status?.podIP;
  if (!ip) return undefined;
  for (const c of pod.spec?.containers ?? []) {
    const port = c.ports?.find((p) => p.name === GRPC_PORT_NAME);
    if (port !== undefined) return ip.includes(':') ? `[${ip}]:${port.containerPort}` : `${ip}:${port.containerPort}`;
  }
  return undefined;
}

/** A table annotation read alone: the full form is the table, a compact one needs a fetch. */
function annotatedTable(pod: V1Pod): ModelTable | undefined {
  const a = parseTableAnnotation(pod.metadata?.annotations?.[MODELS_ANNOTATION]);
  return a?.form === 'full' ? a.table : undefined;
}

/**
 * Pure but for `tableOf`: the routes from MultiplexedDeployments and pods as the informers hold
 * them. A resource whose spec does not parse, or whose prefix another resource already took
 * (the older one, by namespace/name order, wins), is skipped with a warning; a garbage table
 * annotation leaves its pod routable without a table.
 */
export function routesFromObjects(mxds: readonly MxdObject[], pods: readonly V1Pod[], log: Logger, tableOf: (pod: V1Pod, url: string) => ModelTable | undefined = annotatedTable): RouteState[] {
  const routes: RouteState[] = [];
  const taken = new Map<string, string>();
  const sorted = [...mxds].sort((a, b) => `${a.metadata?.namespace}/${a.metadata?.name}`.localeCompare(`${b.metadata?.namespace}/${b.metadata?.name}`));
  for (const mxd of sorted) {
    const id = `${mxd.metadata?.namespace ?? ''}/${mxd.metadata?.name ?? ''}`;
    const spec = multiplexedDeploymentSpecSchema.safeParse(mxd.spec);
    if (!spec.success) {
      log.warn('skipping MultiplexedDeployment with an invalid spec', { resource: id, problem: spec.error.issues[0]?.message });
      continue;
    }
    const owner = taken.get(spec.data.routePrefix);
    if (owner !== undefined) {
      log.warn('skipping MultiplexedDeployment whose routePrefix is taken', { resource: id, routePrefix: spec.data.routePrefix, takenBy: owner });
      continue;
    }
    taken.set(spec.data.routePrefix, id);
    const replicas: ReplicaEndpoint[] = pods
      .filter((p) => p.metadata?.namespace === mxd.metadata?.namespace && p.metadata?.labels?.[LABEL_DEPLOYMENT] === mxd.metadata?.name && podIsReady(p))
      .map((p) => {
        const url = `http://${p.status?.podIP ?? ''}:${REPLICA_PORT}`;
        return { name: p.metadata?.name ?? '', url, grpc: podGrpcAddress(p), table: tableOf(p, url) };
      });
    routes.push({
      prefix: spec.data.routePrefix,
      pool: kubePoolKey(mxd.metadata?.namespace ?? '', mxd.metadata?.name ?? ''),
      maxOngoingRequests: spec.data.maxOngoingRequests,
      matchTimeoutMs: spec.data.matchTimeoutSeconds * 1000,
      tableLagMs: spec.data.tablePublishIntervalMs + TABLE_LAG_MARGIN_MS,
      replicas,
    });
  }
  return routes;
}

/**
 * Informers on MultiplexedDeployments and on the pods labelled with one (across namespaces,
 * or in `namespace`), through common/kube-informer.ts: relisted on a 410 Gone, started again
 * after an error, so an API server restart heals by itself.
 */
export class KubeDiscovery implements Discovery {
  private readonly informers: Pick<KubeInformer<KubernetesObject>, 'start' | 'stop'>[] = [];
  private stopped = false;
  private pending: NodeJS.Timeout | undefined;
  private tables: ReplicaTables | undefined;
  /** Ends a start() still waiting for its first lists when the router stops. */
  private unblock = (): void => undefined;

  constructor(
    private readonly namespace: string | undefined,
    private readonly log: Logger,
  ) {}

  async start(onUpdate: (routes: RouteState[]) => void): Promise<void> {
    const kc = new KubeConfig();
    kc.loadFromDefault();
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    const ns = this.namespace;
    const hooks = { log: this.log };
    const mxds = new KubeInformer<MxdObject>(kc, { name: 'MultiplexedDeployments', path: customObjectsPath(PLURAL, ns), list: () => listCustomObjects<MxdObject>(custom, PLURAL, ns) }, hooks);
    const pods = new KubeInformer<V1Pod>(
      kc,
      {
        name: 'pods',
        path: ns ? `/api/v1/namespaces/${ns}/pods` : '/api/v1/pods',
        list: () => (ns ? core.listNamespacedPod({ namespace: ns, labelSelector: LABEL_DEPLOYMENT }) : core.listPodForAllNamespaces({ labelSelector: LABEL_DEPLOYMENT })),
        labelSelector: LABEL_DEPLOYMENT,
      },
      hooks,
    );
    const snapshot = (): RouteState[] => {
      const routes = routesFromObjects(mxds.list(), pods.list(), this.log, (p, url) =>
        tables.tableOf(`${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`, url, p.metadata?.annotations?.[MODELS_ANNOTATION]),
      );
      tables.sweep();
      return routes;
    };
    const emit = (): void => {
      if (this.pending || this.stopped) return;
      this.pending = setTimeout(() => {
        this.pending = undefined;
        onUpdate(snapshot());
      }, COALESCE_MS);
    };
    const tables = new ReplicaTables({
      fetch: (url) => readModelTable(url, { timeoutMs: TABLE_FETCH_TIMEOUT_MS }),
      concurrency: TABLE_FETCHES,
      retryMs: TABLE_RETRY_MS,
      maxRetryMs: 30_000,
      clock: systemClock,
      setTimer: systemSetTimer,
      onChange: emit,
      log: this.log,
    });
    this.tables = tables;
    mxds.onChange(emit);
    pods.onChange(emit);
    this.informers.push(mxds, pods);
    // The routes are first published only once both lists have succeeded, so a router that
    // starts while the API server is away stays unready instead of serving an empty route table.
    const stopped = new Promise<void>((resolve) => (this.unblock = resolve));
    for (const i of this.informers) i.start();
    await Promise.race([Promise.all([mxds.synced, pods.synced]), stopped]);
    if (this.stopped) return;
    // The first routes wait (a bounded while) for the exact tables compact annotations name,
    // so a router that just started does not place its first requests blind.
    snapshot();
    let waited: NodeJS.Timeout | undefined;
    await Promise.race([tables.settled(), new Promise<void>((resolve) => (waited = setTimeout(resolve, TABLE_FETCH_TIMEOUT_MS)))]);
    clearTimeout(waited);
    if (!this.stopped) onUpdate(snapshot());
  }

  stop(): void {
    this.stopped = true;
    this.unblock();
    if (this.pending) clearTimeout(this.pending);
    this.tables?.stop();
    for (const i of this.informers) i.stop();
  }
}
