import type { Watch } from '@kubernetes/client-node';
import type { Logger } from '../common/log.js';
import { API_GROUP, API_VERSION, LABEL_DEPLOYMENT, LABEL_MANAGED_BY, PLURAL } from '../common/names.js';
import { controllerKey, ownKey, podFingerprint, podKey, splitKey } from './event-keys.js';
import { resourcePath, type KubeClient } from './kube-client.js';
import type { OperatorMetrics } from './metrics.js';
import type { ReconcileResult } from './reconciler.js';
import { MANAGED_BY } from './resources/meta.js';
import { ResourceWatch, type KubeObject, type WatchEventType, type WatchTarget } from './resource-watch.js';
import type { WorkQueue } from './work-queue.js';

export interface ControllerOptions {
  /** Namespace to watch; undefined watches all. */
  namespace: string | undefined;
  workers: number;
  /** Every resource is reconciled at least this often, to repair drift no watch reports. */
  resyncMs: number;
}

export type ReconcileFn = (namespace: string, name: string) => Promise<ReconcileResult>;

/**
 * Watches → work queue → workers. Keys are "namespace/name" of MultiplexedDeployments; each
 * is reconciled by one worker at a time, errors retry with per-key backoff.
 */
export class Controller {
  private readonly watches: ResourceWatch[] = [];
  private readonly podPrints = new Map<string, string>();
  private readonly known = new Set<string>();
  private workers: Promise<void>[] = [];
  private resyncTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: KubeClient,
    private readonly watch: Watch,
    private readonly queue: WorkQueue,
    private readonly reconcile: ReconcileFn,
    private readonly metrics: OperatorMetrics,
    private readonly log: Logger,
    private readonly options: ControllerOptions,
  ) {}

  start(): void {
    const ns = this.options.namespace;
    const owned = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
    const targets: [WatchTarget, (type: WatchEventType, obj: KubeObject) => void][] = [
      [{ name: PLURAL, path: resourcePath(`${API_GROUP}/${API_VERSION}`, PLURAL, ns) }, (t, o) => this.onResource(t, o)],
      [{ name: 'deployments', path: resourcePath('apps/v1', 'deployments', ns), labelSelector: owned }, (_t, o) => this.enqueue(controllerKey(o))],
      [{ name: 'services', path: resourcePath('v1', 'services', ns), labelSelector: owned }, (_t, o) => this.enqueue(controllerKey(o))],
      [
        { name: 'horizontalpodautoscalers', path: resourcePath('autoscaling/v2', 'horizontalpodautoscalers', ns), labelSelector: owned },
        (_t, o) => this.enqueue(controllerKey(o)),
      ],
      [{ name: 'pods', path: resourcePath('v1', 'pods', ns), labelSelector: LABEL_DEPLOYMENT }, (t, o) => this.onPod(t, o)],
    ];
    for (const [target, handler] of targets) {
      const w = new ResourceWatch(this.client, this.watch, target, handler, this.log, () => this.metrics.watchRestarts.inc({ resource: target.name }));
      this.watches.push(w);
      void w.start();
    }
    this.workers = Array.from({ length: this.options.workers }, () => this.work());
    this.resyncTimer = setInterval(() => {
      for (const key of this.known) this.queue.add(key);
      this.updateDepth();
    }, this.options.resyncMs);
  }

  /** Stops the watches and lets in-flight reconciles finish. */
  async stop(): Promise<void> {
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    for (const w of this.watches) w.stop();
    this.queue.shutDown();
    await Promise.all(this.workers);
  }

  private onResource(type: WatchEventType, obj: KubeObject): void {
    const key = ownKey(obj);
    if (key === undefined) return;
    if (type === 'DELETED') this.known.delete(key);
    else this.known.add(key);
    this.enqueue(key);
  }

  private onPod(type: WatchEventType, pod: KubeObject): void {
    const uid = pod.metadata?.uid ?? '';
    if (type === 'DELETED') {
      this.podPrints.delete(uid);
    } else {
      const print = podFingerprint(pod);
      if (this.podPrints.get(uid) === print) return;
      this.podPrints.set(uid, print);
    }
    this.enqueue(podKey(pod));
  }

  private enqueue(key: string | undefined): void {
    if (key === undefined) return;
    this.queue.add(key);
    this.updateDepth();
  }

  private updateDepth(): void {
    this.metrics.queueDepth.set(this.queue.length);
  }

  private async work(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      this.updateDepth();
      if (key === undefined) return;
      const { namespace, name } = splitKey(key);
      const end = this.metrics.reconcileDuration.startTimer();
      try {
        const result = await this.reconcile(namespace, name);
        this.queue.forget(key);
        if (result.terminal === true) {
          this.metrics.reconciles.inc({ result: 'terminal' });
        } else if (result.requeueAfterMs !== undefined) {
          this.metrics.reconciles.inc({ result: 'requeue' });
          this.queue.addAfter(key, result.requeueAfterMs);
        } else {
          this.metrics.reconciles.inc({ result: 'success' });
        }
      } catch (err) {
        this.metrics.reconciles.inc({ result: 'error' });
        const retryInMs = this.queue.addRateLimited(key);
        this.log.warn('reconcile failed', { key, error: err instanceof Error ? err.message : String(err), retryInMs });
      } finally {
        end();
        this.queue.done(key);
      }
    }
  }
}
