import type { KubernetesObject, V1Deployment, V1HorizontalPodAutoscaler, V1Pod } from '@kubernetes/client-node';
import type { ModelRouteStatus } from '../../../common/model-route.js';
import type { MultiplexedDeploymentStatus } from '../../../common/resource.js';
import type { ObjectReader, StoredResource } from '../../../operator/caches.js';
import type { ObjectWriter } from '../../../operator/kube-writer.js';
import type { StoredRoute } from '../../../operator/route-status.js';

/** A write the fake saw, for tests to count. */
export interface Write {
  verb: 'apply' | 'delete' | 'create' | 'patchStatus' | 'patchRouteStatus';
  kind: string;
  name: string;
}

/** Any object as stored: dates as the API server's strings or as Dates, as the caches hold them. */
interface Stored {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; generation?: number; labels?: Record<string, string>; deletionTimestamp?: string | Date };
  spec?: unknown;
  status?: unknown;
}

const clone = <T>(obj: T): T => structuredClone(obj);

/** What an apply compares: everything but status and the metadata the API server sets. */
function applied(obj: Stored): string {
  const { status: _status, metadata, ...rest } = obj;
  const { uid: _uid, resourceVersion: _rv, ...meta } = metadata ?? {};
  return JSON.stringify({ ...rest, metadata: meta });
}

/**
 * The operator's own reader and writer interfaces over one in-memory store: what the API
 * server holds is what the caches show (no watch lag). Each write bumps the resourceVersion of
 * what it changed, and an apply that changes nothing keeps it, as server-side apply does. Not a
 * Kubernetes API server: no defaulting, no field ownership, no garbage collection.
 */
export class FakeCluster implements ObjectReader, ObjectWriter {
  readonly writes: Write[] = [];
  /** Makes the next applies throw while it returns an error for the object. */
  failApply: ((obj: KubernetesObject) => Error | undefined) | undefined;
  private readonly objects = new Map<string, Stored>();
  private version = 0;

  private static id(apiVersion: string | undefined, kind: string | undefined, namespace: string | undefined, name: string | undefined): string {
    return `${apiVersion ?? ''}/${kind ?? ''}/${namespace ?? ''}/${name ?? ''}`;
  }

  private idOf(obj: Stored): string {
    return FakeCluster.id(obj.apiVersion, obj.kind, obj.metadata?.namespace, obj.metadata?.name);
  }

  private find<T>(apiVersion: string, kind: string, namespace: string, name: string): T | undefined {
    return this.objects.get(FakeCluster.id(apiVersion, kind, namespace, name)) as T | undefined;
  }

  private all<T>(kind: string, namespace?: string): T[] {
    return [...this.objects.values()].filter((o) => o.kind === kind && (namespace === undefined || o.metadata?.namespace === namespace)) as T[];
  }

  /**
   * Stores `obj` as someone else writes it (a user, another controller): a new resourceVersion,
   * and a new generation when the spec changed and `obj` names none.
   */
  put(obj: Stored): void {
    const id = this.idOf(obj);
    const before = this.objects.get(id);
    const uid = obj.metadata?.uid ?? before?.metadata?.uid ?? `uid-${id}`;
    const sameSpec = before !== undefined && JSON.stringify(before.spec) === JSON.stringify(obj.spec);
    const generation = obj.metadata?.generation ?? (before?.metadata?.generation ?? 0) + (sameSpec ? 0 : 1);
    this.objects.set(id, { ...clone(obj), metadata: { ...clone(obj.metadata), uid, generation, resourceVersion: String(++this.version) } });
  }

  /** The stored object, for a test to change and put back. */
  get(apiVersion: string, kind: string, namespace: string, name: string): Stored | undefined {
    const o = this.find<Stored>(apiVersion, kind, namespace, name);
    return o === undefined ? undefined : clone(o);
  }

  remove(apiVersion: string, kind: string, namespace: string, name: string): void {
    this.objects.delete(FakeCluster.id(apiVersion, kind, namespace, name));
  }

  count(verb: Write['verb']): number {
    return this.writes.filter((w) => w.verb === verb).length;
  }

  // ObjectReader: the caches.

  multiplexedDeployment(namespace: string, name: string): StoredResource | undefined {
    return this.find('modelmux.io/v1alpha1', 'MultiplexedDeployment', namespace, name);
  }

  multiplexedDeployments(): readonly StoredResource[] {
    return this.all('MultiplexedDeployment');
  }

  deployment(namespace: string, name: string): V1Deployment | undefined {
    return this.find('apps/v1', 'Deployment', namespace, name);
  }

  horizontalPodAutoscaler(namespace: string, name: string): V1HorizontalPodAutoscaler | undefined {
    return this.find('autoscaling/v2', 'HorizontalPodAutoscaler', namespace, name);
  }

  owned(obj: KubernetesObject): KubernetesObject | undefined {
    return this.objects.get(this.idOf(obj)) as KubernetesObject | undefined;
  }

  replicaPods(namespace: string, name: string): readonly V1Pod[] {
    return this.all<V1Pod>('Pod', namespace).filter((p) => p.metadata?.labels?.['modelmux.io/deployment'] === name);
  }

  modelRoutes(namespace?: string): readonly StoredRoute[] {
    return this.all('ModelRoute', namespace);
  }

  // ObjectWriter: the API server.

  apply<T extends KubernetesObject>(obj: T): Promise<T> {
    this.writes.push({ verb: 'apply', kind: obj.kind ?? '', name: obj.metadata?.name ?? '' });
    const failure = this.failApply?.(obj);
    if (failure !== undefined) return Promise.reject(failure);
    const id = this.idOf(obj);
    const before = this.objects.get(id);
    if (before === undefined || applied(before) !== applied(obj)) {
      const { status: _status, ...spec } = obj as Stored;
      this.put({ ...spec, ...(before?.status !== undefined ? { status: before.status } : {}) });
    }
    return Promise.resolve(clone(this.objects.get(id)) as unknown as T);
  }

  delete(obj: KubernetesObject): Promise<void> {
    this.writes.push({ verb: 'delete', kind: obj.kind ?? '', name: obj.metadata?.name ?? '' });
    this.objects.delete(this.idOf(obj));
    return Promise.resolve();
  }

  create(obj: KubernetesObject): Promise<void> {
    this.writes.push({ verb: 'create', kind: obj.kind ?? '', name: obj.metadata?.name ?? '' });
    return Promise.resolve();
  }

  patchStatus(namespace: string, name: string, status: MultiplexedDeploymentStatus): Promise<void> {
    return this.patchStatusOf('MultiplexedDeployment', namespace, name, status);
  }

  patchRouteStatus(namespace: string, name: string, status: ModelRouteStatus): Promise<void> {
    return this.patchStatusOf('ModelRoute', namespace, name, status);
  }

  private patchStatusOf(kind: 'MultiplexedDeployment' | 'ModelRoute', namespace: string, name: string, status: object): Promise<void> {
    this.writes.push({ verb: kind === 'ModelRoute' ? 'patchRouteStatus' : 'patchStatus', kind, name });
    const stored = this.find<Stored>('modelmux.io/v1alpha1', kind, namespace, name);
    if (stored !== undefined) this.put({ ...stored, status: clone(status) });
    return Promise.resolve();
  }
}
