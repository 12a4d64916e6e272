import type { Watch } from '@kubernetes/client-node';
import type { Logger } from '../common/log.js';
import type { KubeClient } from './kube-client.js';
import { backoffDelayMs, type BackoffPolicy } from './work-queue.js';

/** The fields of any Kubernetes object the watches look at. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
    deletionTimestamp?: string | Date;
  };
  status?: unknown;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchTarget {
  /** For logs and metrics, e.g. "deployments". */
  name: string;
  /** Collection path, e.g. /apis/apps/v1/deployments (all namespaces). */
  path: string;
  labelSelector?: string;
}

interface ListResponse {
  metadata?: { resourceVersion?: string };
  items?: KubeObject[];
}

const WATCH_TIMEOUT_SECONDS = 300;
const WATCH_BACKOFF: BackoffPolicy = { baseMs: 250, maxMs: 10_000 };

function keyOf(o: KubeObject): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

class Gone extends Error {}

/**
 * List-then-watch of one resource type that never gives up: a watch that ends is resumed
 * from the last resourceVersion seen, a 410 Gone (history compacted, API server restarted)
 * relists and reports the differences, and errors back off. client-node's informer stops
 * on such errors, which would leave the operator silently deaf.
 */
export class ResourceWatch {
  private readonly known = new Map<string, KubeObject>();
  private stopped = false;
  private abort: AbortController | undefined;
  private wake: (() => void) | undefined;

  constructor(
    private readonly client: KubeClient,
    private readonly watch: Watch,
    private readonly target: WatchTarget,
    private readonly onEvent: (type: WatchEventType, obj: KubeObject) => void,
    private readonly log: Logger,
    private readonly onRestart: () => void = () => undefined,
  ) {}

  start(): Promise<void> {
    return this.run();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
    this.wake?.();
  }

  private async run(): Promise<void> {
    let resourceVersion: string | undefined;
    let failures = 0;
    while (!this.stopped) {
      try {
        if (resourceVersion === undefined) resourceVersion = await this.relist();
        resourceVersion = await this.watchFrom(resourceVersion);
        failures = 0;
      } catch (err) {
        if (this.stopped) break;
        this.onRestart();
        if (err instanceof Gone) {
          this.log.info('watch history gone, relisting', { watch: this.target.name });
          resourceVersion = undefined;
          continue;
        }
        failures++;
        const delay = backoffDelayMs(failures, WATCH_BACKOFF);
        this.log.warn('watch failed, retrying', { watch: this.target.name, error: String(err), retryInMs: delay });
        await this.sleep(delay);
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  private async relist(): Promise<string> {
    const query: Record<string, string> = {};
    if (this.target.labelSelector !== undefined) query['labelSelector'] = this.target.labelSelector;
    const list = await this.client.request<ListResponse>('GET', this.target.path, { query });
    const seen = new Set<string>();
    for (const item of list.items ?? []) {
      const key = keyOf(item);
      seen.add(key);
      const type: WatchEventType = this.known.has(key) ? 'MODIFIED' : 'ADDED';
      this.known.set(key, item);
      this.onEvent(type, item);
    }
    for (const [key, obj] of [...this.known]) {
      if (!seen.has(key)) {
        this.known.delete(key);
        this.onEvent('DELETED', obj);
      }
    }
    const rv = list.metadata?.resourceVersion;
    if (rv === undefined) throw new Error(`list of ${this.target.name} has no resourceVersion`);
    return rv;
  }

  /** Watches until the server ends the stream; resolves with the last resourceVersion. */
  private watchFrom(resourceVersion: string): Promise<string> {
    let rv = resourceVersion;
    return new Promise<string>((resolve, reject) => {
      let gone = false;
      let failed: unknown;
      const query: Record<string, string | number | boolean> = {
        resourceVersion: rv,
        allowWatchBookmarks: true,
        timeoutSeconds: WATCH_TIMEOUT_SECONDS,
      };
      if (this.target.labelSelector !== undefined) query['labelSelector'] = this.target.labelSelector;
      const onLine = (phase: string, obj: unknown): void => {
        if (phase === 'ERROR') {
          const code = (obj as { code?: number }).code;
          if (code === 410) gone = true;
          else failed = new Error(`watch of ${this.target.name} failed: ${JSON.stringify(obj)}`);
          this.abort?.abort();
          return;
        }
        const o = obj as KubeObject;
        const next = o.metadata?.resourceVersion;
        if (next !== undefined) rv = next;
        if (phase === 'BOOKMARK') return;
        const key = keyOf(o);
        if (phase === 'DELETED') this.known.delete(key);
        else this.known.set(key, o);
        if (phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') this.onEvent(phase, o);
      };
      const onDone = (err: unknown): void => {
        const status = (err as { statusCode?: number } | null)?.statusCode;
        if (gone || status === 410) reject(new Gone());
        else if (failed !== undefined) reject(failed);
        else if (err !== null && err !== undefined && !this.stopped && (err as { name?: string }).name !== 'AbortError') reject(err);
        else resolve(rv);
      };
      this.watch.watch(this.target.path, query, onLine, onDone).then(
        (controller) => {
          this.abort = controller;
          if (this.stopped) controller.abort();
        },
        (err: unknown) => reject(err),
      );
    });
  }
}
