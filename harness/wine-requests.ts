import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT, wineForward, wineWeights } from '../common/wine-model.js';

// What a client of the generated wine models sends and should get back: the load generator's
// requests, and the tests' (test/integration/replica/wine-fixtures.ts re-exports these).

/** Deterministic distinct rows of wine features. */
export function wineRows(n: number, seed = 0): number[][] {
  return Array.from({ length: n }, (_, r) => SAMPLE_WINE.map((v, i) => v * (1 + 0.05 * (((r + seed) * 7 + i) % 5)) + 0.01 * (r + seed)));
}

/** The model's outputs for `rows`, computed in float64 from its weights. */
export function expected(modelId: string, rows: number[][]): number[] {
  return wineForward(wineWeights(modelId), rows);
}

export function v2Body(rows: number[][]): unknown {
  return { inputs: [{ name: WINE_INPUT, shape: [rows.length, WINE_FEATURES], datatype: 'FP32', data: rows.flat() }] };
}
