import type { Random } from '../../common/clock.js';

/** mulberry32: a small seeded generator, so every run of the simulator is the same. */
export function seededRandom(seed: number): Random {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Exponential draw with the given mean (Poisson arrivals). */
export function exponential(random: Random, mean: number): number {
  return -Math.log(1 - random()) * mean;
}
