import type { Clock } from '../../common/clock.js';
import type { Logger } from '../../common/log.js';
import type { ModelTable } from '../../common/model-table.js';
import { parseTableAnnotation, tableDigest, type TableAnnotation, type TableSummary } from '../../common/table-annotation.js';
import type { SetTimer } from '../placement/balancer.js';

export interface ReplicaTablesOptions {
  /** Reads a replica's exact table (`GET /models`); rejects or resolves undefined on failure. */
  fetch: (url: string) => Promise<ModelTable | undefined>;
  /** Fetches in flight at most, across all replicas. */
  concurrency: number;
  /** First wait after a failed fetch; doubles per failure up to `maxRetryMs`. */
  retryMs: number;
  maxRetryMs: number;
  clock: Clock;
  setTimer: SetTimer;
  /** A fetch ended (with a table or a failure): the routes should be read again. */
  onChange: () => void;
  log: Logger;
}

interface Entry {
  url: string;
  /** The annotation last read and what it said: the same value is parsed once. */
  raw: string | undefined;
  parsed: TableAnnotation | undefined;
  /** The last table fetched from the replica, its digest, and the annotation it answered. */
  exact: ModelTable | undefined;
  exactDigest: string;
  answered: string;
  /** What `tableOf` last returned for `shownFor`: the balancer gets the same object back. */
  shown: ModelTable | undefined;
  shownFor: string;
  queued: boolean;
  fetching: boolean;
  failures: number;
  retryAt: number;
  /** Asked for since the last sweep. */
  touched: boolean;
  gone: boolean;
}

/** `version/digest`: names one compact annotation. */
const keyOf = (s: TableSummary): string => `${s.version}/${s.digest}`;

/**
 * What a router knows of each replica's table (ADR 0029). A full annotation is the table. A
 * compact one names a table by digest: when it is not the one last fetched, the replica's
 * `GET /models` is read (one fetch per annotation, `concurrency` at a time) and, until it
 * answers, the last fetched table stands. A failed fetch is retried with backoff; meanwhile the
 * last table loses the ids the annotation's filter rules out (a Bloom filter has no false
 * negatives, so those were evicted), and the router's own sends cover what was added.
 */
export class ReplicaTables {
  private readonly entries = new Map<string, Entry>();
  private readonly queue: Entry[] = [];
  private active = 0;
  private stopped = false;
  private readonly waiters: (() => void)[] = [];

  constructor(private readonly opts: ReplicaTablesOptions) {}

  /** The table to place by for replica `key` (namespace/name) at `url`, whose annotation is `raw`. */
  tableOf(key: string, url: string, raw: string | undefined): ModelTable | undefined {
    let e = this.entries.get(key);
    if (e === undefined || e.url !== url) {
      if (e !== undefined) e.gone = true;
      e = {
        url,
        raw: undefined,
        parsed: undefined,
        exact: undefined,
        exactDigest: '',
        answered: '',
        shown: undefined,
        shownFor: '',
        queued: false,
        fetching: false,
        failures: 0,
        retryAt: 0,
        touched: false,
        gone: false,
      };
      this.entries.set(key, e);
    }
    e.touched = true;
    if (raw !== e.raw) {
      e.raw = raw;
      e.parsed = parseTableAnnotation(raw);
    }
    const p = e.parsed;
    if (p === undefined) return undefined;
    if (p.form === 'full') {
      e.exact = undefined;
      e.exactDigest = e.answered = '';
      return p.table;
    }
    const s = p.summary;
    const named = keyOf(s);
    const exact = e.exact;
    if (exact !== undefined && e.exactDigest === s.digest) return this.show(e, `same:${named}:${exact.version}`, () => withSummary(exact, s));
    if (e.answered !== named && !e.queued && !e.fetching && this.opts.clock.now() >= e.retryAt) this.enqueue(e);
    if (exact === undefined) return undefined;
    if (e.failures === 0) return exact;
    return this.show(e, `pruned:${named}:${exact.version}`, () => pruned(exact, s));
  }

  /** Forgets the replicas `tableOf` was not asked about since the last sweep: gone, or no longer ready. */
  sweep(): void {
    for (const [key, e] of this.entries) {
      if (e.touched) {
        e.touched = false;
        continue;
      }
      e.gone = true;
      this.entries.delete(key);
    }
  }

  /** Resolves once no fetch is queued or in flight (at once if none is). */
  settled(): Promise<void> {
    if (this.active === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private show(e: Entry, key: string, make: () => ModelTable): ModelTable {
    if (e.shownFor !== key || e.shown === undefined) {
      e.shown = make();
      e.shownFor = key;
    }
    return e.shown;
  }

  private enqueue(e: Entry): void {
    e.queued = true;
    this.queue.push(e);
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.active < this.opts.concurrency) {
      const e = this.queue.shift();
      if (e === undefined) return;
      e.queued = false;
      if (e.gone) continue;
      this.active++;
      e.fetching = true;
      void this.fetch(e).finally(() => {
        e.fetching = false;
        this.active--;
        this.pump();
        if (!this.stopped && !e.gone) this.opts.onChange();
        if (this.active === 0 && this.queue.length === 0) this.wake();
      });
    }
  }

  private async fetch(e: Entry): Promise<void> {
    // The annotation that asked: the table fetched answers it, even if newer already.
    const asked = e.parsed?.form === 'compact' ? keyOf(e.parsed.summary) : '';
    let table: ModelTable | undefined;
    let reason = 'not a model table';
    try {
      table = await this.opts.fetch(e.url);
    } catch (err) {
      reason = err instanceof Error ? err.message : String(err);
    }
    if (e.gone) return;
    if (table !== undefined) {
      e.exact = table;
      e.exactDigest = tableDigest(table);
      e.answered = asked;
      e.failures = 0;
      e.retryAt = 0;
      return;
    }
    e.failures++;
    const wait = Math.min(this.opts.maxRetryMs, this.opts.retryMs * 2 ** Math.min(e.failures - 1, 20));
    e.retryAt = this.opts.clock.now() + wait;
    // Asks for the routes again once the wait is over, so the fetch is retried if still needed.
    this.opts.setTimer(wait, () => {
      if (!this.stopped && !e.gone) this.opts.onChange();
    });
    if (e.failures === 1) this.opts.log.warn('cannot read the model table of a replica; placing by its last table until it answers', { replica: e.url, reason });
  }
}

/** The fetched table with the newer annotation's version and counters: the same sets. */
function withSummary(exact: ModelTable, s: TableSummary): ModelTable {
  const t: ModelTable = { ...exact, version: Math.max(exact.version, s.version), capacity: s.capacity };
  if (s.bytes !== undefined) t.bytes = s.bytes;
  if (s.maxBytes !== undefined) t.maxBytes = s.maxBytes;
  return t;
}

/**
 * The last fetched table without what the filter rules out, at its own version: models loaded
 * since are not in it (a filter cannot list them), so it must not claim the newer version.
 */
function pruned(exact: ModelTable, s: TableSummary): ModelTable {
  return { ...exact, loaded: exact.loaded.filter((id) => s.filter.has(id)), loading: exact.loading.filter((id) => s.filter.has(id)) };
}
