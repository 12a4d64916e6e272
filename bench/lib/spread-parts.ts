import { median } from './stats.js';
import type { PatternName } from './traffic.js';

/**
 * bench:spread's arithmetic, apart from its processes: the windows it measured in, summed up
 * per cell (a pool's slot count and a traffic pattern) and compared in pairs taken in the same
 * round, so the machine's slow and fast phases fall on both sides of a difference alike.
 */

/** Where a request's CPU goes, by process: the pool's (local mode's) and the benchmark's own. */
export const PROCESS_GROUPS = ['replicas', 'router', 'local', 'store', 'loadGenerator'] as const;
export type ProcessGroup = (typeof PROCESS_GROUPS)[number];

export interface SpreadWindow {
  slots: number;
  pattern: PatternName;
  round: number;
  throughputRps: number;
  /** Requests that failed (non-2xx or transport errors); the rates below are per successful request. */
  failed: number;
  loadsPer1000: number;
  /** CPU µs per successful request, by process group. */
  cpuUs: Record<ProcessGroup, number>;
}

export const totalCpuUs = (w: SpreadWindow): number => PROCESS_GROUPS.reduce((a, g) => a + w.cpuUs[g], 0);

export interface Cell {
  slots: number;
  pattern: PatternName;
}

export interface CellSummary extends Cell {
  rounds: number;
  /** Failed requests over all its windows. */
  failed: number;
  throughputRps: number;
  loadsPer1000: number;
  cpuUs: Record<ProcessGroup, number>;
  totalCpuUs: number;
}

/** A value for every process group. */
export const perGroup = (f: (g: ProcessGroup) => number): Record<ProcessGroup, number> => Object.fromEntries(PROCESS_GROUPS.map((g) => [g, f(g)])) as Record<ProcessGroup, number>;

const windowsOf = (windows: readonly SpreadWindow[], c: Cell): SpreadWindow[] => windows.filter((w) => w.slots === c.slots && w.pattern === c.pattern);

/** A cell's medians over its rounds; undefined when it has no window. */
export function summarizeCell(windows: readonly SpreadWindow[], c: Cell): CellSummary | undefined {
  const ws = windowsOf(windows, c);
  if (ws.length === 0) return undefined;
  return {
    ...c,
    rounds: ws.length,
    failed: ws.reduce((n, w) => n + w.failed, 0),
    throughputRps: median(ws.map((w) => w.throughputRps)),
    loadsPer1000: median(ws.map((w) => w.loadsPer1000)),
    cpuUs: perGroup((g) => median(ws.map((w) => w.cpuUs[g]))),
    totalCpuUs: median(ws.map(totalCpuUs)),
  };
}

export interface Spread {
  /** 1 − slowest / fastest median throughput, in percent: bench:mux's measure. */
  percent: number;
  slowest: PatternName;
  fastest: PatternName;
  /** 1 − cheapest / dearest median CPU per request, in percent: the spread of a machine whose CPU is all a request waits for. */
  cpuPercent: number;
}

/** The spread of one pool's patterns by their median throughputs over rounds. */
export function spreadOf(windows: readonly SpreadWindow[], slots: number, patterns: readonly PatternName[]): Spread | undefined {
  const cells = patterns.map((pattern) => summarizeCell(windows, { slots, pattern })).filter((c): c is CellSummary => c !== undefined);
  if (cells.length < 2) return undefined;
  const slowest = cells.reduce((a, b) => (b.throughputRps < a.throughputRps ? b : a));
  const fastest = cells.reduce((a, b) => (b.throughputRps > a.throughputRps ? b : a));
  const cpu = cells.map((c) => c.totalCpuUs);
  return {
    percent: 100 * (1 - slowest.throughputRps / fastest.throughputRps),
    slowest: slowest.pattern,
    fastest: fastest.pattern,
    cpuPercent: 100 * (1 - Math.min(...cpu) / Math.max(...cpu)),
  };
}

export interface PairedDifference {
  /** Rounds in which both cells were measured. */
  rounds: number;
  /** Median over those rounds of a's throughput over b's. */
  throughputRatio: number;
  /** Median over those rounds of a's CPU per request less b's, in all and by process group. */
  totalCpuUs: number;
  cpuUs: Record<ProcessGroup, number>;
}

/** Cell `a` against cell `b`, round by round; undefined when no round has both. */
export function pairedDifference(windows: readonly SpreadWindow[], a: Cell, b: Cell): PairedDifference | undefined {
  const bs = new Map(windowsOf(windows, b).map((w) => [w.round, w]));
  const pairs = windowsOf(windows, a).flatMap((wa) => {
    const wb = bs.get(wa.round);
    return wb === undefined ? [] : [[wa, wb] as const];
  });
  if (pairs.length === 0) return undefined;
  return {
    rounds: pairs.length,
    throughputRatio: median(pairs.map(([x, y]) => x.throughputRps / y.throughputRps)),
    totalCpuUs: median(pairs.map(([x, y]) => totalCpuUs(x) - totalCpuUs(y))),
    cpuUs: perGroup((g) => median(pairs.map(([x, y]) => x.cpuUs[g] - y.cpuUs[g]))),
  };
}
