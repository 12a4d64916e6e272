import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { encodeOnnxModel, type OnnxNode, type OnnxTensor } from '../../common/onnx-writer.js';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT, WINE_OUTPUT } from '../../common/wine-model.js';
import { seededRandom } from '../simulator/rng.js';
import { checkPrediction } from './answer-check.js';

/**
 * The distinct-graph family of bench:mux: models whose graphs all differ (five layer mixes,
 * two to four blocks deep, each its own width), so no two share a graph and modelmux's shared
 * graph sessions and mapped weights cannot apply: every load creates a session, as Ray's does.
 * Each is a few MB of MatMul-sized weights (transformer feed-forward blocks: LayerNorm,
 * residual adds, gated units, softmax gates). They take the wine models' input and give their
 * output (`features` [batch, 11] → `quality` [batch, 1]), so both systems serve them with the
 * same request.
 */

export const DISTINCT_KINDS = ['relu-mlp', 'layernorm-residual', 'gated-linear', 'softmax-gate', 'sigmoid-stack'] as const;
export type DistinctKind = (typeof DISTINCT_KINDS)[number];

/** Ids `g00`, `g01`, … of the family. */
export function distinctIds(count: number): string[] {
  const width = Math.max(2, String(count - 1).length);
  return Array.from({ length: count }, (_, i) => `g${String(i).padStart(width, '0')}`);
}

/** The shape of model `index`: every index gets a width of its own, so no two graphs are equal. */
export function distinctShape(index: number): { kind: DistinctKind; blocks: number; width: number } {
  return { kind: DISTINCT_KINDS[index % DISTINCT_KINDS.length] as DistinctKind, blocks: 2 + (Math.floor(index / DISTINCT_KINDS.length) % 3), width: 384 + 8 * index };
}

/** The ONNX file of model `index` of the family (deterministic). */
export function distinctModelBytes(index: number): Uint8Array {
  const { kind, blocks, width } = distinctShape(index);
  const rand = seededRandom(0x5eed + index);
  const initializers: OnnxTensor[] = [];
  const nodes: OnnxNode[] = [];
  const weight = (name: string, dims: number[], scale: number): string => {
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = (rand() * 2 - 1) * scale;
    initializers.push({ name, dims, data });
    return name;
  };
  const ones = (name: string, n: number): string => {
    initializers.push({ name, dims: [n], data: new Float32Array(n).fill(1) });
    return name;
  };
  let seq = 0;
  const node = (opType: string, inputs: string[], extra: Pick<OnnxNode, 'intAttributes'> = {}): string => {
    const out = `t${seq++}`;
    nodes.push({ opType, inputs, outputs: [out], ...extra });
    return out;
  };
  const scale = 1 / Math.sqrt(width);
  const dense = (x: string, i: string): string => node('Gemm', [x, weight(`w${i}`, [width, width], scale), weight(`b${i}`, [width], 0.1)]);
  let x = node('Gemm', [WINE_INPUT, weight('w_in', [WINE_FEATURES, width], 0.05), weight('b_in', [width], 0.1)]);
  for (let b = 0; b < blocks; b++) {
    if (kind === 'relu-mlp') x = node('Relu', [dense(x, `${b}`)]);
    else if (kind === 'sigmoid-stack') x = node('Sigmoid', [dense(x, `${b}`)]);
    else if (kind === 'layernorm-residual') {
      const normed = node('LayerNormalization', [x, ones(`ln${b}_scale`, width), weight(`ln${b}_bias`, [width], 0.01)]);
      x = node('Add', [x, node('Tanh', [dense(normed, `${b}`)])]);
    } else if (kind === 'gated-linear') x = node('Mul', [dense(x, `${b}a`), node('Sigmoid', [dense(x, `${b}g`)])]);
    else x = node('Relu', [dense(node('Mul', [x, node('Softmax', [dense(x, `${b}g`)], { intAttributes: { axis: -1 } })]), `${b}`)]);
  }
  nodes.push({ opType: 'Gemm', inputs: [x, weight('w_out', [width, 1], scale), weight('b_out', [1], 1)], outputs: [WINE_OUTPUT] });
  return encodeOnnxModel({
    name: `distinct-${kind}-${blocks}x${width}`,
    opset: 17,
    inputs: [{ name: WINE_INPUT, shape: ['batch', WINE_FEATURES] }],
    outputs: [{ name: WINE_OUTPUT, shape: ['batch', 1] }],
    initializers,
    nodes,
  });
}

/** Where the family's files are kept between runs, in the file store's layout `<dir>/<id>/model.onnx`. */
export const distinctDir = (): string => join(homedir(), '.cache/modelmux/bench-models/distinct-v1');

/** Writes the family's files that are missing; answers the total bytes. */
export async function ensureDistinctModels(ids: readonly string[]): Promise<number> {
  let total = 0;
  for (const [i, id] of ids.entries()) {
    const path = join(distinctDir(), id, 'model.onnx');
    const have = await readFile(path).catch(() => undefined);
    if (have) {
      total += have.length;
      continue;
    }
    const data = distinctModelBytes(i);
    await mkdir(join(distinctDir(), id), { recursive: true });
    await writeFile(`${path}.tmp`, data);
    await rename(`${path}.tmp`, path);
    total += data.length;
  }
  return total;
}

/**
 * One request for a distinct-family model, checked against onnxruntime-node run in this process
 * on the same file.
 */
export async function checkDistinctAnswer(url: string, id: string): Promise<void> {
  const session = await ort.InferenceSession.create(join(distinctDir(), id, 'model.onnx'));
  const out = await session.run({ [WINE_INPUT]: new ort.Tensor('float32', Float32Array.from(SAMPLE_WINE), [1, WINE_FEATURES]) });
  const expected = Number((out[WINE_OUTPUT]?.data as Float32Array)[0]);
  await session.release();
  await checkPrediction(url, id, expected);
}
