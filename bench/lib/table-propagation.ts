import type { ChangeLog } from './table-publishers.js';
import type { SeenLog } from './table-watcher.js';

/** Per load ending in [from, to]: the time until both routers' balancers had a version at least as new. */
export function propagation(changes: ChangeLog, seen: readonly SeenLog[], from: number, to: number): { samples: number[]; unseen: number } {
  const samples: number[] = [];
  let unseen = 0;
  for (const [pod, ends] of Object.entries(changes)) {
    for (const [version, at] of ends) {
      if (at < from || at > to) continue;
      let worst = 0;
      for (const s of seen) {
        const first = (s[pod] ?? []).find(([v]) => v >= version);
        if (first === undefined) {
          worst = Number.NaN;
          break;
        }
        worst = Math.max(worst, first[1] - at);
      }
      if (Number.isNaN(worst)) unseen++;
      else samples.push(worst);
    }
  }
  return { samples, unseen };
}
