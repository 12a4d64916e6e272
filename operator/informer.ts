import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject, type ObjectCache } from '@kubernetes/client-node';
import type { Logger } from '../common/log.js';
import { apiErrorMessage } from './api-clients.js';
import { backoffDelayMs, type BackoffPolicy } from './work-queue.js';

export interface InformerTarget<T extends KubernetesObject> {
  /** For logs and metrics: the plural, e.g. "deployments". */
  name: string;
  /** Collection path of the watch, e.g. /apis/apps/v1/deployments (all namespaces). */
  path: string;
  /** The list the cache starts from and falls back to after a 410 Gone. */
  list: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
}

export type ChangeType = 'add' | 'update' | 'delete';

export interface InformerDeps {
  log: Logger;
  /** One watch request started (client-node's Watch does not go through the API clients' middleware). */
  onWatch: () => void;
  /** The informer stopped on an error and is being started again. */
  onRestart: () => void;
}

const RESTART_BACKOFF: BackoffPolicy = { baseMs: 250, maxMs: 10_000 };
/** An error this long after the previous one starts the backoff over: the outage in between ended. */
const FAILURE_MEMORY_MS = 60_000;

/** client-node's Watch, counting its requests and asking for bookmarks. */
class CountingWatch extends Watch {
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
    // Bookmarks keep the resourceVersion of a selective watch (pods of replicas only) current,
    // so resuming after the client's 30 s idle timeout seldom finds it compacted (410, relist).
    return super.watch(path, { ...queryParams, allowWatchBookmarks: true }, callback, done);
  }
}

/**
 * client-node's informer (ListWatch: list, then watch from the list's resourceVersion,
 * resuming after the stream ends and relisting after a 410 Gone, with its cache) for one kind.
 * ListWatch stops for good on any other error — the API server away, a list refused — so
 * this starts it again after a backoff: the operator never goes deaf.
 */
export class Informer<T extends KubernetesObject> implements ObjectCache<T> {
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
    onChange: (type: ChangeType, obj: T) => void,
    private readonly deps: InformerDeps,
  ) {
    this.synced = new Promise((resolve) => (this.markSynced = resolve));
    const list = async (): Promise<KubernetesListObject<T>> => {
      const items = await target.list();
      this.listed = true;
      return items;
    };
    this.listWatch = new ListWatch<T>(target.path, new CountingWatch(kc, deps.onWatch), list, false, target.labelSelector);
    this.listWatch.on('add', (o) => onChange('add', o));
    this.listWatch.on('update', (o) => onChange('update', o));
    this.listWatch.on('delete', (o) => onChange('delete', o));
    this.listWatch.on('error', (err: unknown) => this.onError(err));
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
    const delay = backoffDelayMs(this.failures, RESTART_BACKOFF);
    this.deps.onRestart();
    this.deps.log.warn('watch failed, restarting', { watch: this.target.name, error: apiErrorMessage(err), retryInMs: delay });
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.run(), delay);
  }
}
