import type { Clock } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { ModelId } from '../../common/model-id.js';
import type { LoadedVersion } from './model-cache.js';
import { nextCheck, type RevalidationPace } from './revalidation-schedule.js';

/** What one question to the store found. */
export type RevalidationResult = 'unchanged' | 'changed' | 'not_found' | 'failed';

export interface LoadedRevalidatorOptions {
  /** The model cache's side of it (ModelCache). */
  cache: {
    versions(): LoadedVersion[];
    checked(id: string, version: string, at: number): void;
    swap(id: string): Promise<boolean>;
  };
  /** The store's version of a model now (VersionedStore.version). */
  version: (id: ModelId) => Promise<string>;
  pace: RevalidationPace;
  clock: Clock;
  log: Logger;
  onResult: (result: RevalidationResult) => void;
}

/**
 * Keeps loaded models at the store's version. The disk tier revalidates a file only when a model
 * is loaded again (ADR 0015), so a model that stays loaded, the most used one, would answer with
 * the weights it loaded for as long as it stays: this loop asks the store for each loaded model's
 * version once per interval, at a bounded rate, one question at a time, and has the cache load a
 * changed model beside the old version and swap it in (ModelCache.swap). A model the store no
 * longer holds, or that the store cannot be asked about, keeps serving as loaded: an outage or a
 * mistaken delete never takes a model away that requests are using.
 */
export class LoadedRevalidator {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private lastCheckAt: number | undefined;

  constructor(private readonly opts: LoadedRevalidatorOptions) {}

  start(): void {
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.step(), ms);
    // Never what keeps the process alive: shutdown stops it, but a drain must not wait for it.
    this.timer.unref();
  }

  private async step(): Promise<void> {
    const next = nextCheck(this.opts.cache.versions(), this.opts.clock.now(), this.opts.pace, this.lastCheckAt);
    if ('check' in next) await this.check(next.check);
    this.schedule('waitMs' in next ? next.waitMs : 0);
  }

  private async check(loaded: LoadedVersion): Promise<void> {
    const { cache, clock, log } = this.opts;
    const id = loaded.id;
    this.lastCheckAt = clock.now();
    let now: string;
    try {
      now = await this.opts.version(id as ModelId);
    } catch (err) {
      cache.checked(id, loaded.version, clock.now());
      const gone = err instanceof ModelmuxError && err.code === 'model_not_found';
      this.opts.onResult(gone ? 'not_found' : 'failed');
      const reason = err instanceof Error ? err.message : String(err);
      if (gone) log.warn(`Model '${id}' is no longer in the store; its loaded version keeps serving until it is evicted.`, { model: id, event: 'revalidate-gone' });
      else log.info(`Could not revalidate model '${id}'; asking again in an interval.`, { model: id, event: 'revalidate-failed', reason });
      return;
    }
    cache.checked(id, loaded.version, clock.now());
    // '' is a store that gives no ETag: nothing to compare, so nothing to swap.
    if (now === '' || now === loaded.version) {
      this.opts.onResult('unchanged');
      return;
    }
    this.opts.onResult('changed');
    log.info(`Model '${id}' changed in the store; loading the new version beside the loaded one.`, { model: id, event: 'revalidate-changed', loaded: loaded.version, store: now });
    await cache.swap(id);
  }
}
