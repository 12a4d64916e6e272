import type { KubernetesObject } from '@kubernetes/client-node';
import { apiErrorMessage } from '../common/kube-api-errors.js';
import type { ChangeType } from '../common/kube-informer.js';
import type { Logger } from '../common/log.js';
import type { WatchedGroup } from './caches.js';
import type { OperatorMetrics } from './metrics.js';
import type { ReconcileResult } from './reconciler.js';
import { WorkQueue } from './work-queue.js';

/** The controllers, as metrics and logs name them. */
export type ControllerName = 'multiplexeddeployment' | 'modelroute';

/** What makes one controller (controller-runtime's builder: For, Owns, Watches, predicates, Reconciler). */
export interface ControllerSpec<K extends string> {
  name: ControllerName;
  /**
   * The keys an informer event makes work for; none when the controller's predicates drop it.
   * Called for every event, leading or not, so that the predicates' memory stays current.
   */
  keysFor(group: WatchedGroup, type: ChangeType, obj: KubernetesObject): readonly K[];
  /** Every key the caches hold: enqueued when the workers start and at each resync. */
  allKeys(): Iterable<K>;
  /** Resolves once the caches this controller reads hold complete lists. */
  synced(): Promise<void>;
  reconcile(key: K): Promise<ReconcileResult>;
  /** Before allKeys are enqueued (a new leadership term, a resync): forget what was learnt since the last. */
  resync?(): void;
}

export interface ControllerOptions {
  workers: number;
  /** Every key is reconciled at least this often, to repair drift no watch reports. */
  resyncMs: number;
}

/**
 * Its own typed work queue and workers, fed by the shared caches' events, as controller-runtime
 * does it: events only produce keys, each key is reconciled by one worker at a time, errors
 * retry with per-key backoff. The workers run only while this process leads; events seen
 * meanwhile enqueue nothing, and starting enqueues every key, so a new leader misses nothing.
 * Workers start once the caches they read hold a complete list: a reconcile on a half-filled
 * cache would, say, miss an HPA to delete.
 */
export class Controller<K extends string> {
  private queue: WorkQueue<K> | undefined;
  private workers: Promise<void>[] = [];
  private resyncTimer: NodeJS.Timeout | undefined;
  private running = false;
  private signalStop: () => void = () => undefined;

  constructor(
    private readonly spec: ControllerSpec<K>,
    private readonly metrics: OperatorMetrics,
    private readonly log: Logger,
    private readonly options: ControllerOptions,
    private readonly newQueue: () => WorkQueue<K> = () => new WorkQueue<K>(),
  ) {}

  /** An informer event: enqueues its keys while the workers run. */
  observe(group: WatchedGroup, type: ChangeType, obj: KubernetesObject): void {
    const keys = this.spec.keysFor(group, type, obj);
    for (const key of keys) this.enqueue(key);
  }

  /** Starts the workers once the caches are synced; resolves then (or once stopped before). */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const stopped = new Promise<void>((resolve) => (this.signalStop = resolve));
    await Promise.race([this.spec.synced(), stopped]);
    if (!this.running) return;
    this.queue = this.newQueue();
    this.updateDepth();
    this.resync();
    this.log.info('controller started', { controller: this.spec.name, workers: this.options.workers });
    const queue = this.queue;
    this.workers = Array.from({ length: this.options.workers }, () => this.work(queue));
    this.resyncTimer = setInterval(() => this.resync(), this.options.resyncMs);
  }

  /** Stops the workers, letting in-flight reconciles finish; the caches go on. */
  async stop(): Promise<void> {
    this.running = false;
    this.signalStop();
    clearInterval(this.resyncTimer);
    this.queue?.shutDown();
    this.queue = undefined;
    this.updateDepth();
    await Promise.all(this.workers);
    this.workers = [];
  }

  private resync(): void {
    this.spec.resync?.();
    for (const key of this.spec.allKeys()) this.enqueue(key);
  }

  private enqueue(key: K): void {
    if (this.queue === undefined) return;
    this.queue.add(key);
    this.updateDepth();
  }

  private updateDepth(): void {
    this.metrics.queueDepth.set({ controller: this.spec.name }, this.queue?.length ?? 0);
  }

  private async work(queue: WorkQueue<K>): Promise<void> {
    const controller = this.spec.name;
    for (;;) {
      const key = await queue.get();
      this.updateDepth();
      if (key === undefined) return;
      const end = this.metrics.reconcileDuration.startTimer({ controller });
      try {
        const result = await this.spec.reconcile(key);
        queue.forget(key);
        if (result.terminal === true) {
          this.metrics.reconciles.inc({ controller, result: 'terminal' });
        } else if (result.requeueAfterMs !== undefined) {
          this.metrics.reconciles.inc({ controller, result: 'requeue' });
          queue.addAfter(key, result.requeueAfterMs);
        } else {
          this.metrics.reconciles.inc({ controller, result: 'success' });
        }
      } catch (err) {
        this.metrics.reconciles.inc({ controller, result: 'error' });
        const retryInMs = queue.addRateLimited(key);
        this.log.warn('reconcile failed', { controller, key, error: apiErrorMessage(err), retryInMs });
      } finally {
        end();
        queue.done(key);
      }
    }
  }
}
