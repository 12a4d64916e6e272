/**
 * Exponentially decayed counts per key and in total: each key's share of recent events, with
 * memory bounded by forgetting keys whose count has decayed away. The balancer keeps two, of
 * requests per model and of sends per replica. Pure: the caller passes the time.
 */

/** Keys kept before the ones that decayed away are swept. */
const SWEEP_AT = 4096;

/** A key whose count fell under this (less than one event a half-life ago) goes at a sweep. */
const FORGET_BELOW = 0.5;

interface Count {
  count: number;
  at: number;
}

export class DecayedCounts {
  private readonly byKey = new Map<string, Count>();
  private readonly all: Count = { count: 0, at: 0 };
  private sweepAt = SWEEP_AT;

  /** The decay per millisecond, as an exponent of e: a read costs one multiply and one `exp`. */
  private readonly rate: number;

  /** `halfLifeMs`: after this long an event weighs half as much. */
  constructor(halfLifeMs: number) {
    this.rate = -Math.LN2 / halfLifeMs;
  }

  add(key: string, now: number): void {
    this.increment(this.all, now);
    const e = this.byKey.get(key);
    // Updated in place: the router adds once per request, and a new entry per add was garbage.
    if (e === undefined) this.byKey.set(key, { count: 1, at: now });
    else this.increment(e, now);
    if (this.byKey.size >= this.sweepAt) {
      for (const [k, x] of this.byKey) if (this.decayed(x, now) < FORGET_BELOW) this.byKey.delete(k);
      // Many live keys: sweep again only once the map has doubled, so sweeping stays amortised O(1).
      this.sweepAt = Math.max(SWEEP_AT, 2 * this.byKey.size);
    }
  }

  /** The decayed count of all events. */
  total(now: number): number {
    return this.decayed(this.all, now);
  }

  /** The decayed count of `key`'s events; 0 for a key not seen lately. */
  count(key: string, now: number): number {
    const e = this.byKey.get(key);
    return e === undefined ? 0 : this.decayed(e, now);
  }

  /** `key`'s part of the total, in [0, 1]; 0 for a key not seen lately. */
  share(key: string, now: number): number {
    const e = this.byKey.get(key);
    const total = this.total(now);
    return e === undefined || total <= 0 ? 0 : Math.min(1, this.decayed(e, now) / total);
  }

  /** One more event at `now`, after decaying what `x` counted before. */
  private increment(x: Count, now: number): void {
    x.count = this.decayed(x, now) + 1;
    x.at = now;
  }

  private decayed(x: Count, now: number): number {
    // Under load many reads come at the time of the last add: nothing to decay.
    return now === x.at ? x.count : x.count * Math.exp(this.rate * (now - x.at));
  }
}
