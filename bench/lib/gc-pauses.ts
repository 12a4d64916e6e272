import { type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';

/** This process's garbage-collection pauses from now until `take`: their sum and the longest, in ms. */
export function clientPauses(): { take(): { totalMs: number; maxMs: number }; stop(): void } {
  let totalMs = 0;
  let maxMs = 0;
  const add = (entries: readonly PerformanceEntry[]): void => {
    for (const e of entries) {
      totalMs += e.duration;
      maxMs = Math.max(maxMs, e.duration);
    }
  };
  const observer = new PerformanceObserver((list) => add(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return {
    take: () => {
      // Entries reach the callback a turn after their pause; those still queued count too.
      add(observer.takeRecords());
      return { totalMs, maxMs };
    },
    stop: () => observer.disconnect(),
  };
}
