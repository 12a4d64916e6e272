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

interface Group<T> {
  items: T[];
  opts: BatchPolicyOptions;
  /** When the group's first request arrived. */
  since: number;
}

export class BatchQueue<T> {
  private readonly groups = new Map<string, Group<T>>();

  /** Queues `item` under the options of its model; returns the batch it completes, if any, to run now. */
  add(key: string, item: T, now: number, opts: BatchPolicyOptions): Batch<T> | undefined {
    if (opts.maxBatchSize <= 1) return { key, items: [item] };
    let g = this.groups.get(key);
    if (!g) {
      g = { items: [], opts, since: now };
      this.groups.set(key, g);
    }
    g.items.push(item);
    if (g.items.length >= g.opts.maxBatchSize) {
      this.groups.delete(key);
      return { key, items: g.items };
    }
    return undefined;
  }

  /** Removes and returns every group whose oldest request has waited long enough. */
  takeDue(now: number): Batch<T>[] {
    const out: Batch<T>[] = [];
    for (const [key, g] of this.groups) {
      if (now - g.since >= g.opts.batchWaitMs) {
        this.groups.delete(key);
        out.push({ key, items: g.items });
      }
    }
    return out;
  }

  /** When the next group falls due, or undefined when nothing waits. */
  nextDeadline(): number | undefined {
    let next: number | undefined;
    for (const g of this.groups.values()) {
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
}
