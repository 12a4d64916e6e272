import { ListWatch, Watch, type CustomObjectsApi, type KubeConfig, type KubernetesListObject, type KubernetesObject, type ObjectCache } from '@kubernetes/client-node';
import { backoffDelayMs, type BackoffPolicy } from './backoff.js';
import { apiErrorMessage } from './kube-api-errors.js';
import type { Logger } from './log.js';
import { API_GROUP, API_VERSION } from './names.js';

/**
 * The one informer of the router and the operator: client-node's (ListWatch, what makeInformer
 * builds: list, watch from the list's resourceVersion, resume when the stream ends, relist on a
 * 410 Gone and report what vanished, keep a cache), started again after a backoff when it stops
 * on any other error — the API server away, a list refused — so neither program goes deaf.
 */

export type ChangeType = 'add' | 'update' | 'delete';

export interface InformerTarget<T extends KubernetesObject> {
  /** For logs and metrics, e.g. "deployments" or "ModelRoutes". */
  name: string;
  /** Collection path of the watch, e.g. /apis/apps/v1/deployments (all namespaces). */
  path: string;
  /** The list the cache starts from and falls back to after a 410 Gone. */
  list: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
}

export interface InformerHooks {
  log: Logger;
  /** One watch request started (client-node's Watch goes through no API client middleware). */
  onWatch?: () => void;
  /** The informer stopped on an error and is being started again. */
  onRestart?: () => void;
}

/** Restarts after an error: 250 ms, doubling to 10 s while the API server stays away. */
const WATCH_RESTART_BACKOFF: BackoffPolicy = { baseMs: 250, maxMs: 10_000 };
/** An error this long after the previous one starts the backoff over: the outage in between ended. */
const FAILURE_MEMORY_MS = 60_000;

/** The collection path of a kind, in one namespace or (undefined) all of them. */
export function collectionPath(apiVersion: string, plural: string, namespace: string | undefined): string {
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  return `${base}${namespace ? `/namespaces/${encodeURIComponent(namespace)}` : ''}/${plural}`;
}

/** The watch path of a modelmux.io resource, in one namespace or ('' or undefined) all of them. */
export function customObjectsPath(plural: string, namespace: string | undefined): string {
  return collectionPath(`${API_GROUP}/${API_VERSION}`, plural, namespace);
}

/** The list an informer of customObjectsPath(plural, namespace) starts from. */
export function listCustomObjects<T extends KubernetesObject>(custom: CustomObjectsApi, plural: string, namespace: string | undefined): Promise<KubernetesListObject<T>> {
  return (
    namespace ? custom.listNamespacedCustomObject({ group: API_GROUP, version: API_VERSION, namespace, plural }) : custom.listClusterCustomObject({ group: API_GROUP, version: API_VERSION, plural })
  ) as Promise<KubernetesListObject<T>>;
}

/** client-node's Watch, counting its requests and asking for bookmarks. */
class BookmarkWatch extends Watch {
  constructor(
    kc: KubeConfig,
    private readonly onWatch: () => void,
  ) {
    super(kc);
  }

  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    this.onWatch();
    // Bookmarks keep the resourceVersion of a selective watch (replica pods only) current, so
    // resuming after the client's 30 s idle timeout seldom finds it compacted (410, relist).
    return super.watch(path, { ...queryParams, allowWatchBookmarks: true }, callback, done);
  }
}

/**
 * One kind's informer. It is makeInformer's ListWatch, built here with a Watch of its own
 * (makeInformer takes no Watch) so that watch requests are counted and ask for bookmarks.
 */
export class KubeInformer<T extends KubernetesObject> implements ObjectCache<T> {
  private readonly listWatch: ListWatch<T>;
  private stopped = false;
  private listed = false;
  private failures = 0;
  private lastFailureAt = Number.NEGATIVE_INFINITY;
  private restartTimer: NodeJS.Timeout | undefined;
  private markSynced: () => void = () => undefined;
  /** Resolves once the cache holds a complete list (never, if stopped before). */
  readonly synced: Promise<void>;

  constructor(
    kc: KubeConfig,
    readonly target: InformerTarget<T>,
    private readonly hooks: InformerHooks,
  ) {
    this.synced = new Promise((resolve) => (this.markSynced = resolve));
    const list = async (): Promise<KubernetesListObject<T>> => {
      const items = await target.list();
      this.listed = true;
      return items;
    };
    this.listWatch = new ListWatch<T>(target.path, new BookmarkWatch(kc, hooks.onWatch ?? (() => undefined)), list, false, target.labelSelector);
    this.listWatch.on('error', (err: unknown) => this.onError(err));
  }

  /** Calls `handler` for every change the cache sees, the first list's objects included (as adds). */
  onChange(handler: (type: ChangeType, obj: T) => void): void {
    this.listWatch.on('add', (o) => handler('add', o));
    this.listWatch.on('update', (o) => handler('update', o));
    this.listWatch.on('delete', (o) => handler('delete', o));
  }

  start(): void {
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    void this.listWatch.stop();
  }

  get(name: string, namespace?: string): T | undefined {
    return this.listWatch.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.listWatch.list(namespace);
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    try {
      // Resolves once the list is in the cache and the watch request is under way, or once an
      // error has been reported to onError.
      await this.listWatch.start();
    } catch (err) {
      // Credentials that cannot be applied (an exec plugin failing) throw instead.
      this.onError(err);
      return;
    }
    // ListWatch goes on to watch after a list even when stopped meanwhile: end that watch.
    if (this.stopped) void this.listWatch.stop();
    else if (this.listed) this.markSynced();
  }

  private onError(err: unknown): void {
    // Stopping aborts the watch, which ListWatch reports as an error too.
    if (this.stopped) return;
    const at = Date.now();
    this.failures = at - this.lastFailureAt > FAILURE_MEMORY_MS ? 1 : this.failures + 1;
    this.lastFailureAt = at;
    const retryInMs = backoffDelayMs(this.failures, WATCH_RESTART_BACKOFF);
    this.hooks.onRestart?.();
    this.hooks.log.warn('watch failed; restarting', { watch: this.target.name, error: apiErrorMessage(err), retryInMs });
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.run(), retryInMs);
    // A pending restart must not keep a stopping process alive.
    this.restartTimer.unref();
  }
}
