/** Latency summaries: exact percentiles over the recorded samples (a run keeps them all). */
export interface LatencySummary {
  count: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Nearest-rank percentile of sorted samples; NaN when there are none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export function summarize(samplesMs: readonly number[]): LatencySummary {
  const sorted = Float64Array.from(samplesMs).sort();
  const arr = Array.from(sorted);
  const sum = arr.reduce((a, b) => a + b, 0);
  return {
    count: arr.length,
    meanMs: arr.length ? sum / arr.length : Number.NaN,
    p50Ms: percentile(arr, 50),
    p90Ms: percentile(arr, 90),
    p99Ms: percentile(arr, 99),
    maxMs: arr.length ? (arr[arr.length - 1] as number) : Number.NaN,
  };
}

/**
 * The item whose `key` is the median of all items' (the lower middle one of an even count), so
 * a table can show one real measurement instead of a blend of several; undefined when empty.
 */
export function medianBy<T>(items: readonly T[], key: (item: T) => number): T | undefined {
  const sorted = [...items].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/**
 * `items` starting at index `round` (modulo their count), the ones before it moved to the end:
 * rounds of measurements in this order never run one item always right after the same other
 * one, or always last, when the machine slows down or speeds up along a run.
 */
export function rotated<T>(items: readonly T[], round: number): T[] {
  if (items.length === 0) return [];
  const shift = round % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/** The mean of `xs`; NaN when empty. */
export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** The median of `xs` (the mean of the two middle values of an even count); NaN when empty. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((x, y) => x - y);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** P(X ≤ k) for X ~ Binomial(n, 1/2). */
function binomialHalfCdf(n: number, k: number): number {
  let term = 0.5 ** n; // C(n,0) / 2^n
  let sum = 0;
  for (let i = 0; i <= k; i++) {
    sum += term;
    term = (term * (n - i)) / (i + 1);
  }
  return sum;
}

/**
 * The median of `xs` with a distribution-free confidence interval from order statistics: the
 * narrowest [x(k), x(n−k+1)] whose coverage, 1 − 2·P(Binomial(n, ½) ≤ k − 1), is at least `level`.
 * Few samples cannot reach 95% (five give [min, max] at 93.8%, three 75%): then the interval is
 * [min, max] and `coverage` says what it holds.
 */
export function medianCi(xs: readonly number[], level = 0.95): { median: number; low: number; high: number; coverage: number } {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return { median: Number.NaN, low: Number.NaN, high: Number.NaN, coverage: 0 };
  let k = 1;
  while (k + 1 <= n - k && 1 - 2 * binomialHalfCdf(n, k) >= level) k++;
  return { median: median(s), low: s[k - 1] as number, high: s[n - k] as number, coverage: 1 - 2 * binomialHalfCdf(n, k - 1) };
}
