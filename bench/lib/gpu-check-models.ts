import { copyFile, mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT, WINE_OUTPUT } from '../../common/wine-model.js';
import { distinctDir, distinctIds, ensureDistinctModels } from './model-families.js';
import { ensureModelFiles, modelDirFor } from './model-set.js';
import { modelIds } from './traffic.js';

/**
 * The GPU check's models, half of each family so both ways the replica holds a model are measured:
 * wine MLPs of one graph (shared-graph sessions, the weights fed as inputs) and distinct graphs
 * (a session each, the weights inside it). All take `features` [batch, 11] and answer `quality`.
 */
export type Family = 'wine' | 'distinct';

export interface CheckModel {
  id: string;
  family: Family;
  /** The file in the check's store, `<dir>/<id>/model.onnx`. */
  path: string;
}

/** Rows of every request: enough for a batch to reach the device's matrix units, few enough to read. */
export const ROWS = 8;

/** The request's input, row-major [ROWS, 11]: the sample wine, each row scaled a little differently. */
export function checkInput(): Float32Array {
  const data = new Float32Array(ROWS * WINE_FEATURES);
  for (let r = 0; r < ROWS; r++) for (let f = 0; f < WINE_FEATURES; f++) data[r * WINE_FEATURES + f] = (SAMPLE_WINE[f] ?? 0) * (1 + 0.05 * r);
  return data;
}

/**
 * A file store of `count` models in a fresh temporary folder, the families alternating so a
 * check cut short by its time budget still has both. Generated files are cached between runs in
 * ~/.cache/modelmux/bench-models (model-set.ts, model-families.ts) and copied here.
 */
export async function checkStore(count: number, wineBytes: number): Promise<{ dir: string; models: CheckModel[] }> {
  const wine = modelIds(Math.ceil(count / 2));
  const distinct = distinctIds(Math.floor(count / 2));
  await mkdir(modelDirFor(wineBytes), { recursive: true });
  await ensureModelFiles(modelDirFor(wineBytes), wine, wineBytes);
  await ensureDistinctModels(distinct);
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-gpu-check-'));
  const models: CheckModel[] = [];
  for (let i = 0; i < count; i++) {
    const family: Family = i % 2 === 0 ? 'wine' : 'distinct';
    const id = (family === 'wine' ? wine[i / 2] : distinct[(i - 1) / 2]) as string;
    const from = family === 'wine' ? join(modelDirFor(wineBytes), id, 'model.onnx') : join(distinctDir(), id, 'model.onnx');
    await mkdir(join(dir, id));
    await copyFile(from, join(dir, id, 'model.onnx'));
    models.push({ id, family, path: join(dir, id, 'model.onnx') });
  }
  return { dir, models };
}

/** The answer of onnxruntime-node on the CPU in this process: the reference the replica is held to. */
export async function cpuAnswer(model: CheckModel, input: Float32Array): Promise<number[]> {
  const session = await ort.InferenceSession.create(model.path, { executionProviders: ['cpu'] });
  try {
    const out = await session.run({ [WINE_INPUT]: new ort.Tensor('float32', input, [ROWS, WINE_FEATURES]) });
    return Array.from(out[WINE_OUTPUT]?.data as Float32Array);
  } finally {
    await session.release();
  }
}
