import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../common/log.js';
import { apiErrorMessage } from './api-clients.js';
import type { ObjectReader, OperatorCaches, WatchedGroup } from './caches.js';
import { controllerKey, ownKey, podFingerprint, podKey, routesKey, splitKey } from './event-keys.js';
import type { ChangeType } from './informer.js';
import type { OperatorMetrics } from './metrics.js';
import type { ReconcileResult } from './reconciler.js';
import type { WorkQueue } from './work-queue.js';

export interface ControllerOptions {
  workers: number;
  /** Every resource is reconciled at least this often, to repair drift no watch reports. */
  resyncMs: number;
}

/** One reconcile of the resource namespace/name, reading from `cache`. */
export type ReconcileFn = (cache: ObjectReader, namespace: string, name: string) => Promise<ReconcileResult>;

/** The caches a controller runs on, made by the caller with the controller's event handler. */
export type CachesFactory = (onChange: (group: WatchedGroup, type: ChangeType, obj: KubernetesObject) => void) => OperatorCaches;

/**
 * Informers → work queue → workers, as controller-runtime does it. Keys are "namespace/name"
 * of MultiplexedDeployments, or routesKey(namespace) for all the ModelRoutes of a namespace;
 * events only produce keys, each key is reconciled by one worker at a time from the caches,
 * errors retry with per-key backoff. Workers start once every cache holds a complete list: a
 * reconcile on a half-filled cache would, say, miss an HPA to delete.
 */
export class Controller {
  private readonly caches: OperatorCaches;
  private readonly podPrints = new Map<string, string>();
  private workers: Promise<void>[] = [];
  private resyncTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private signalStop: () => void = () => undefined;
  private readonly stopping = new Promise<void>((resolve) => (this.signalStop = resolve));

  constructor(
    makeCaches: CachesFactory,
    private readonly queue: WorkQueue,
    private readonly reconcile: ReconcileFn,
    private readonly metrics: OperatorMetrics,
    private readonly log: Logger,
    private readonly options: ControllerOptions,
  ) {
    this.caches = makeCaches((group, type, obj) => this.onChange(group, type, obj));
  }

  /** Starts the informers; resolves once their caches are filled and the workers run. */
  async start(): Promise<void> {
    this.caches.start();
    await Promise.race([this.caches.synced(), this.stopping]);
    if (this.stopped) return;
    this.log.info('caches synced, reconciling');
    this.workers = Array.from({ length: this.options.workers }, () => this.work());
    this.resyncTimer = setInterval(() => {
      for (const obj of this.caches.resources()) this.enqueue(ownKey(obj));
      for (const namespace of this.caches.routeNamespaces()) this.enqueue(routesKey(namespace));
    }, this.options.resyncMs);
  }

  /** Stops the informers and lets in-flight reconciles finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.signalStop();
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.caches.stop();
    this.queue.shutDown();
    await Promise.all(this.workers);
  }

  private onChange(group: WatchedGroup, type: ChangeType, obj: KubernetesObject): void {
    const namespace = obj.metadata?.namespace;
    // A pool appearing or going changes its routes' ResolvedRefs.
    if ((group === 'routes' || group === 'resources') && namespace !== undefined) this.enqueue(routesKey(namespace));
    if (group === 'resources') this.enqueue(ownKey(obj));
    else if (group === 'owned') this.enqueue(controllerKey(obj));
    else if (group === 'pods') this.onPod(type, obj);
  }

  private onPod(type: ChangeType, pod: KubernetesObject): void {
    const uid = pod.metadata?.uid ?? '';
    if (type === 'delete') {
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
        const result = await this.reconcile(this.caches, namespace, name);
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
        this.log.warn('reconcile failed', { key, error: apiErrorMessage(err), retryInMs });
      } finally {
        end();
        this.queue.done(key);
      }
    }
  }
}
