/**
 * The dynamic batching policy, pure: which queued requests run together and when.
 * Requests are grouped by a key that names the model (and the shape of its inputs past dim 0),
 * so a batch never mixes models. A group runs once it holds `maxBatchSize` requests, or once
 * its oldest request has waited `batchWaitMs` (0: the requests that arrived in the same turn
 * of the event loop). Each model has its own options (replica/store/model-config.ts).
 */
export interface BatchPolicyOptions {
  /** Requests per batch at most; 1 means every request runs alone at once. */
  maxBatchSize: number;
  /** How long the first request of a batch waits for company, in milliseconds. */
  batchWaitMs: number;
}

export interface Batch<T> {
  key: string;
  items: T[];
}

/**
 * How long a model's emptied group is kept for its next request. Groups are not deleted per batch:
 * a Map whose keys come and go with every batch keeps finished batches alive through young
 * collections (ADR 0056); a group idle this long goes when a new key comes, so the map holds the
 * keys of the last minute and deletes rarely.
 */
export const IDLE_GROUP_MS = 60_000;

interface Group<T> {
  items: T[];
  opts: BatchPolicyOptions;
  /** When the group's first request arrived; while it is empty, when it last ran. */
  since: number;
}

export class BatchQueue<T> {
  private readonly groups = new Map<string, Group<T>>();

  /** Queues `item` under the options of its model; returns the batch it completes, if any, to run now. */
  add(key: string, item: T, now: number, opts: BatchPolicyOptions): Batch<T> | undefined {
    if (opts.maxBatchSize <= 1) return { key, items: [item] };
    let g = this.groups.get(key);
    if (g === undefined) {
      this.dropIdle(now);
      g = { items: [], opts, since: now };
      this.groups.set(key, g);
    } else if (g.items.length === 0) {
      g.opts = opts;
      g.since = now;
    }
    g.items.push(item);
    return g.items.length >= g.opts.maxBatchSize ? take(key, g, now) : undefined;
  }

  /** Takes every group whose oldest request has waited long enough. */
  takeDue(now: number): Batch<T>[] {
    const out: Batch<T>[] = [];
    for (const [key, g] of this.groups) if (g.items.length > 0 && now - g.since >= g.opts.batchWaitMs) out.push(take(key, g, now));
    return out;
  }

  /** When the next group falls due, or undefined when nothing waits. */
  nextDeadline(): number | undefined {
    let next: number | undefined;
    for (const g of this.groups.values()) {
      if (g.items.length === 0) continue;
      const d = g.since + g.opts.batchWaitMs;
      if (next === undefined || d < next) next = d;
    }
    return next;
  }

  get size(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.items.length;
    return n;
  }

  /** Groups held, waiting or empty: what IDLE_GROUP_MS bounds. */
  get groupCount(): number {
    return this.groups.size;
  }

  private dropIdle(now: number): void {
    for (const [key, g] of this.groups) if (g.items.length === 0 && now - g.since >= IDLE_GROUP_MS) this.groups.delete(key);
  }
}

/** The group's requests as a batch; the group stays, empty, for the model's next request. */
function take<T>(key: string, g: Group<T>, now: number): Batch<T> {
  const items = g.items;
  g.items = [];
  g.since = now;
  return { key, items };
}
