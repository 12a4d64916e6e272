import type { SplitBackend } from '../../common/model-route.js';
import { rendezvousWeight } from '../placement/rendezvous.js';

/**
 * How a split route picks a backend for one request. Pure: `u` is a uniform draw in [0, 1)
 * from the router's injected random source, so a test fixes it.
 */

/** The backend whose share of the weights' line holds `u`; a backend of weight 0 is never chosen. */
export function weightedBackend(backends: readonly SplitBackend[], u: number): string {
  let total = 0;
  for (const b of backends) total += b.weight;
  let point = u * total;
  for (const b of backends) {
    if (b.weight === 0) continue;
    if (point < b.weight) return b.model;
    point -= b.weight;
  }
  // u * total rounds up to total only when u is within one ulp of 1: the last weighted backend.
  return [...backends].reverse().find((b) => b.weight > 0)?.model ?? (backends[0] as SplitBackend).model;
}

/**
 * The backend for sticky key `key` (a header's value): weighted rendezvous hashing. Each
 * backend scores `-weight / ln(h)` with `h` a hash of key and backend in (0, 1); the highest
 * wins, which gives each backend its weight's share of keys and, when a weight changes, moves
 * only keys between that backend and the others: a user stays on their version unless the
 * canary's share shrinks below them. No state, so every router instance agrees.
 */
export function stickyBackend(backends: readonly SplitBackend[], key: string): string {
  let best: SplitBackend | undefined;
  let bestScore = Number.NEGATIVE_INFINITY;
  for (const b of backends) {
    if (b.weight === 0) continue;
    const h = (rendezvousWeight(b.model, key) + 0.5) / 4294967296;
    const score = -b.weight / Math.log(h);
    if (score > bestScore || (score === bestScore && best !== undefined && b.model < best.model)) {
      best = b;
      bestScore = score;
    }
  }
  // The schema gives a split a backend of weight above 0 (common/model-route.ts): one scored.
  if (best === undefined) throw new Error('a split route without a weighted backend');
  return best.model;
}

/** Mirror copies under way at once by default: past it a copy is dropped, never queued. */
export const DEFAULT_MIRROR_MAX_IN_FLIGHT = 64;

/** Whether a request is copied to a mirror taking `percent` of the requests. */
export function mirrored(percent: number, u: number): boolean {
  return u * 100 < percent;
}
