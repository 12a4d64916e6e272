import type { LoadedVersion } from './model-cache.js';

/** How often each loaded model is revalidated, and how fast the store may be asked. */
export interface RevalidationPace {
  /** A loaded model is asked about again this long after the store last confirmed it. */
  intervalMs: number;
  /** Questions to the store (HEADs) per second at most, whatever the number of loaded models. */
  perSecond: number;
}

/** Ask the store about `check` now, or look again in `waitMs`. */
export type NextCheck = { check: LoadedVersion } | { waitMs: number };

/**
 * The next step of the revalidation loop. Pure: the loaded versions, the time and when the last
 * question went out are its inputs. The model confirmed longest ago goes first, once that was at
 * least an interval ago and at least 1/perSecond after the previous question: with more loaded
 * models than `intervalMs × perSecond` a model waits longer than the interval, never the store.
 */
export function nextCheck(loaded: readonly LoadedVersion[], now: number, pace: RevalidationPace, lastCheckAt: number | undefined): NextCheck {
  let oldest: LoadedVersion | undefined;
  for (const v of loaded) if (oldest === undefined || v.checkedAt < oldest.checkedAt) oldest = v;
  if (oldest === undefined) return { waitMs: pace.intervalMs };
  const due = oldest.checkedAt + pace.intervalMs - now;
  const spacing = lastCheckAt === undefined ? 0 : lastCheckAt + 1000 / pace.perSecond - now;
  const waitMs = Math.max(due, spacing);
  return waitMs <= 0 ? { check: oldest } : { waitMs };
}
