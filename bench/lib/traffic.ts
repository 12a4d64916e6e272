import { modelSampler, PATTERNS, type PatternName } from '../simulator/patterns.js';
import { seededRandom } from '../simulator/rng.js';

/**
 * The request mixes of the measured benchmark are the placement simulator's patterns (the
 * SageMaker article's uniform / one hot / a few popular, plus Zipf(1.0)), drawn with the same
 * seeded generator, so the simulated and the measured tables describe the same traffic.
 */
export { PATTERNS, type PatternName };

export const PATTERN_LABELS: Record<PatternName, string> = {
  uniform: 'uniform over all models',
  'one-hot': 'one hot model (80%)',
  'five-popular': 'five popular models (80%)',
  zipf: 'Zipf(1.0)',
};

/** Model ids of a generated set: `m000`, `m001`, … (zero-padded so they sort). */
export function modelIds(count: number): string[] {
  const width = Math.max(3, String(count - 1).length);
  return Array.from({ length: count }, (_, i) => `m${String(i).padStart(width, '0')}`);
}

/** An endless seeded sequence of model ids under `pattern`: the same for every system. */
export function idSampler(pattern: PatternName, ids: readonly string[], seed: number): () => string {
  const next = modelSampler(pattern, ids.length, seededRandom(seed));
  return () => ids[next()] as string;
}
