/**
 * Recent latencies of one route, for the adaptive try timeout (try-timeout.ts): for the route
 * as a whole and for each of its recently asked models, a histogram of the last one to two
 * windows (the current one and the one before), from which the 99th percentile is read. Log
 * buckets 25% apart: a percentile is at most a quarter above the truth, which the timeout's
 * multiple dwarfs. Memory is bounded: at most `maxKeys` models, the least recently refreshed
 * going first. Pure: the caller passes the time.
 */

const BUCKETS = 64;
/** Bucket i holds latencies in (BASE_MS × RATIO^(i-1), BASE_MS × RATIO^i]; the last one everything above. */
const BASE_MS = 1;
const RATIO = 1.25;
const LOG_RATIO = Math.log(RATIO);

class Histogram {
  current = new Uint32Array(BUCKETS);
  previous = new Uint32Array(BUCKETS);
  currentCount = 0;
  previousCount = 0;
  /** The window number (time / windowMs) `current` counts. */
  window: number;

  constructor(window: number) {
    this.window = window;
  }

  /** Moves to `window`: the current counts become the previous ones, or both clear after a gap. */
  roll(window: number): void {
    if (window <= this.window) return;
    if (window === this.window + 1) {
      const old = this.previous;
      this.previous = this.current;
      this.previousCount = this.currentCount;
      old.fill(0);
      this.current = old;
    } else {
      this.current.fill(0);
      this.previous.fill(0);
      this.previousCount = 0;
    }
    this.currentCount = 0;
    this.window = window;
  }

  add(ms: number): void {
    const i = ms <= BASE_MS ? 0 : Math.min(BUCKETS - 1, Math.ceil(Math.log(ms / BASE_MS) / LOG_RATIO));
    this.current[i] = (this.current[i] ?? 0) + 1;
    this.currentCount++;
  }

  get count(): number {
    return this.currentCount + this.previousCount;
  }

  /** The upper bound of the bucket that holds the `q` quantile. */
  quantile(q: number): number {
    const rank = Math.ceil(q * this.count);
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += (this.current[i] ?? 0) + (this.previous[i] ?? 0);
      if (seen >= rank) return BASE_MS * RATIO ** i;
    }
    return BASE_MS * RATIO ** (BUCKETS - 1);
  }
}

export class LatencyWindows {
  private readonly route: Histogram;
  /** Insertion order is refresh order: a model is moved to the end when its window rolls. */
  private readonly models = new Map<string, Histogram>();

  /**
   * `windowMs`: the length of a window (a percentile covers the last one to two);
   * `maxKeys`: models tracked at once.
   */
  constructor(
    private readonly windowMs: number,
    private readonly maxKeys: number,
  ) {
    this.route = new Histogram(0);
  }

  /** A try of `model` (undefined: a request without one) got its response headers after `ms`. */
  record(model: string | undefined, ms: number, now: number): void {
    const window = Math.floor(now / this.windowMs);
    this.route.roll(window);
    this.route.add(ms);
    if (model === undefined) return;
    let h = this.models.get(model);
    if (h === undefined) {
      if (this.models.size >= this.maxKeys) {
        const oldest = this.models.keys().next();
        if (oldest.done !== true) this.models.delete(oldest.value);
      }
      h = new Histogram(window);
      this.models.set(model, h);
    } else if (h.window < window) {
      // Refreshed once a window rather than on every record: the map is touched rarely on the hot path.
      this.models.delete(model);
      this.models.set(model, h);
      h.roll(window);
    }
    h.add(ms);
  }

  /**
   * The recent 99th percentile of `model`'s tries when it has at least `minSamples`, else the
   * route's when that has, else undefined: too little is known to judge a try by.
   */
  p99(model: string | undefined, now: number, minSamples: number): number | undefined {
    const window = Math.floor(now / this.windowMs);
    const h = model === undefined ? undefined : this.models.get(model);
    if (h !== undefined) {
      h.roll(window);
      if (h.count >= minSamples) return h.quantile(0.99);
    }
    this.route.roll(window);
    return this.route.count >= minSamples ? this.route.quantile(0.99) : undefined;
  }
}
