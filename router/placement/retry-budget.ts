/**
 * The retry budget of one route's pool, shared by all its requests (Finagle's RetryBudget,
 * Envoy's retry budget): the retries of the last `WINDOW_MS` may number at most `percent`% of
 * the requests of that window, plus `MIN_PER_SECOND` a second so that a quiet pool can still
 * retry. A retry costs a replica as much as a request; when most tries fail because the pool
 * is overloaded, retries stop at that fraction instead of multiplying the load. Counted over a
 * window, not over requests in flight, so that the burst of retries of a replica that goes
 * down with many requests on it fits, paid for by the traffic before it. Pure: the caller
 * passes the time.
 */

/** How far back requests pay for retries. */
export const WINDOW_MS = 10_000;
/** Retries a second the budget allows however few requests came. */
export const MIN_PER_SECOND = 5;
/** The window is counted in this many slices, each dropped whole as it ages out. */
const SLICES = 10;
const SLICE_MS = WINDOW_MS / SLICES;

export class RetryBudget {
  private readonly requests = new Float64Array(SLICES);
  private readonly retries = new Float64Array(SLICES);
  /** The slice number (time / SLICE_MS) the newest counts belong to. */
  private slice = Number.NEGATIVE_INFINITY;

  /** `percent`: retries per 100 requests of the window. */
  constructor(private percent: number) {}

  configure(percent: number): void {
    this.percent = percent;
  }

  /** A request's first try: it adds to what retries may spend. */
  requested(now: number): void {
    const i = this.advance(now);
    this.requests[i] = (this.requests[i] as number) + 1;
  }

  /** Takes one retry from the budget; false when the window's retries are spent. */
  tryRetry(now: number): boolean {
    const i = this.advance(now);
    let requests = 0;
    let retries = 0;
    for (let k = 0; k < SLICES; k++) {
      requests += this.requests[k] as number;
      retries += this.retries[k] as number;
    }
    if (retries + 1 > (requests * this.percent) / 100 + (MIN_PER_SECOND * WINDOW_MS) / 1000) return false;
    this.retries[i] = (this.retries[i] as number) + 1;
    return true;
  }

  /** The index of `now`'s slice, after clearing the slices that aged out since the last call. */
  private advance(now: number): number {
    const slice = Math.floor(now / SLICE_MS);
    if (slice > this.slice) {
      const from = Math.max(this.slice + 1, slice - SLICES + 1);
      for (let s = from; s <= slice; s++) {
        const k = ((s % SLICES) + SLICES) % SLICES;
        this.requests[k] = 0;
        this.retries[k] = 0;
      }
      this.slice = slice;
    }
    return ((Math.max(slice, this.slice) % SLICES) + SLICES) % SLICES;
  }
}
