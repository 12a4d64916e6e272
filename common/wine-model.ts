import { encodeOnnxModel } from './onnx-writer.js';

/**
 * The example models: a small MLP over the 11 red-wine-quality features of the seed example,
 * `quality = W2·relu(W1·x + b1) + b2`, with weights drawn deterministically from the model id.
 * The same id and size always give the same bytes, so tests can compute expected outputs.
 */

export const WINE_FEATURES = 11;
export const WINE_INPUT = 'features';
export const WINE_OUTPUT = 'quality';
const DEFAULT_HIDDEN = 16;
const FLOATS_PER_HIDDEN_UNIT = WINE_FEATURES + 2;

export interface WineWeights {
  hidden: number;
  w1: Float32Array; // [11, hidden], row-major
  b1: Float32Array; // [hidden]
  w2: Float32Array; // [hidden, 1]
  b2: Float32Array; // [1]
}

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Hidden width that makes the model file weigh about `bytes` (at least the small default). */
export function hiddenUnitsForBytes(bytes: number | undefined): number {
  if (bytes === undefined) return DEFAULT_HIDDEN;
  return Math.max(DEFAULT_HIDDEN, Math.floor(bytes / (4 * FLOATS_PER_HIDDEN_UNIT)));
}

export function wineWeights(modelId: string, hidden = DEFAULT_HIDDEN): WineWeights {
  const rand = mulberry32(fnv1a(modelId));
  const fill = (n: number, scale: number): Float32Array => Float32Array.from({ length: n }, () => (rand() * 2 - 1) * scale);
  return {
    hidden,
    w1: fill(WINE_FEATURES * hidden, 1 / Math.sqrt(WINE_FEATURES)),
    b1: fill(hidden, 0.1),
    w2: fill(hidden, 1 / Math.sqrt(hidden)),
    b2: Float32Array.of(5 + rand()), // centred on a plausible wine quality score
  };
}

export function wineModelBytes(modelId: string, hidden = DEFAULT_HIDDEN): Uint8Array {
  const w = wineWeights(modelId, hidden);
  return encodeOnnxModel({
    name: `wine-${modelId}`,
    opset: 13,
    inputs: [{ name: WINE_INPUT, shape: ['batch', WINE_FEATURES] }],
    outputs: [{ name: WINE_OUTPUT, shape: ['batch', 1] }],
    initializers: [
      { name: 'w1', dims: [WINE_FEATURES, hidden], data: w.w1 },
      { name: 'b1', dims: [hidden], data: w.b1 },
      { name: 'w2', dims: [hidden, 1], data: w.w2 },
      { name: 'b2', dims: [1], data: w.b2 },
    ],
    nodes: [
      { opType: 'Gemm', inputs: [WINE_INPUT, 'w1', 'b1'], outputs: ['h'] },
      { opType: 'Relu', inputs: ['h'], outputs: ['a'] },
      { opType: 'Gemm', inputs: ['a', 'w2', 'b2'], outputs: [WINE_OUTPUT] },
    ],
  });
}

/** The reference forward pass, in float64: expected outputs for tests and the checker. */
export function wineForward(w: WineWeights, rows: readonly (readonly number[])[]): number[] {
  return rows.map((x) => {
    let out = w.b2[0] ?? 0;
    for (let j = 0; j < w.hidden; j++) {
      let h = w.b1[j] ?? 0;
      for (let i = 0; i < WINE_FEATURES; i++) h += (x[i] ?? 0) * (w.w1[i * w.hidden + j] ?? 0);
      if (h > 0) out += h * (w.w2[j] ?? 0);
    }
    return out;
  });
}

/** A plausible red wine (the first row of the UCI winequality-red data set). */
export const SAMPLE_WINE = [7.4, 0.7, 0, 1.9, 0.076, 11, 34, 0.9978, 3.51, 0.56, 9.4] as const;
