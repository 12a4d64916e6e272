import type { Random } from '../../common/clock.js';

/** Traffic patterns: each draws a model index in [0, models). */
export type PatternName = 'uniform' | 'one-hot' | 'five-popular' | 'zipf';
export const PATTERNS: readonly PatternName[] = ['uniform', 'one-hot', 'five-popular', 'zipf'];

export function modelSampler(pattern: PatternName, models: number, random: Random): () => number {
  const uniformFrom = (lo: number): number => lo + Math.min(models - lo - 1, Math.floor(random() * (models - lo)));
  switch (pattern) {
    case 'uniform':
      return () => uniformFrom(0);
    case 'one-hot':
      // 80% to model 0, the rest spread over the others.
      return () => (random() < 0.8 ? 0 : uniformFrom(1));
    case 'five-popular':
      return () => (random() < 0.8 ? Math.min(4, Math.floor(random() * 5)) : uniformFrom(5));
    case 'zipf': {
      // Zipf(1.0): P(k) ∝ 1/(k+1); inverse CDF by binary search.
      const cdf: number[] = [];
      let sum = 0;
      for (let k = 0; k < models; k++) cdf.push((sum += 1 / (k + 1)));
      return () => {
        const u = random() * sum;
        let lo = 0;
        let hi = models - 1;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if ((cdf[mid] ?? Infinity) < u) lo = mid + 1;
          else hi = mid;
        }
        return lo;
      };
    }
  }
}
