import { copyFile, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { hiddenUnitsForBytes, wineModelBytes } from '../../common/wine-model.js';
import { alignFileWeights } from '../../replica/onnx/file-map.js';

/** Where generated models of `bytes` each are kept between runs, and their aligned copies. */
export const modelDirFor = (bytes: number): string => join(homedir(), '.cache/modelmux/bench-models', String(bytes));
const alignedDirFor = (bytes: number): string => join(homedir(), '.cache/modelmux/bench-models-aligned', String(bytes));
/** Where ensureAlignedCopies keeps the aligned copy of model `id` of `bytes`. */
export const alignedCopyPath = (bytes: number, id: string): string => join(alignedDirFor(bytes), `${id}.onnx`);

/**
 * The benchmark's models: `count` deterministic wine models of about `bytes` each, written once
 * to `<dir>/<id>/model.onnx` (the file store's layout) and reused by later runs, since the same
 * id and size always give the same bytes.
 */
export async function ensureModelFiles(dir: string, ids: readonly string[], bytes: number): Promise<{ written: number; totalBytes: number }> {
  const hidden = hiddenUnitsForBytes(bytes);
  let written = 0;
  let totalBytes = 0;
  for (const id of ids) {
    const path = join(dir, id, 'model.onnx');
    const marker = join(dir, id, 'hidden');
    const have = await readFile(marker, 'utf8').catch(() => '');
    const size = await stat(path).then(
      (s) => s.size,
      () => -1,
    );
    if (have === String(hidden) && size > 0) {
      totalBytes += size;
      continue;
    }
    await mkdir(join(dir, id), { recursive: true });
    const data = wineModelBytes(id, hidden);
    // Write then rename, so an interrupted run never leaves a torn model behind.
    await writeFile(`${path}.tmp`, data);
    await rename(`${path}.tmp`, path);
    await writeFile(marker, String(hidden));
    written++;
    totalBytes += data.length;
  }
  return { written, totalBytes };
}

/**
 * The models as the S3 store leaves them after a download: copies with their weights aligned
 * (replica/onnx/aligned-weights.ts), so a replica maps them. Made from ensureModelFiles' files (in
 * `modelDirFor(bytes)`); answers the copies' paths by id.
 */
export async function ensureAlignedCopies(ids: readonly string[], bytes: number): Promise<Map<string, string>> {
  const dir = modelDirFor(bytes);
  await mkdir(dir, { recursive: true });
  await ensureModelFiles(dir, ids, bytes);
  await mkdir(alignedDirFor(bytes), { recursive: true });
  const paths = new Map<string, string>();
  for (const id of ids) {
    const path = alignedCopyPath(bytes, id);
    await copyFile(join(dir, id, 'model.onnx'), path);
    await alignFileWeights(path);
    paths.set(id, path);
  }
  return paths;
}

/** Copies the model files into a bucket under `prefix`, `parallel` uploads at a time. */
export async function uploadModels(dir: string, ids: readonly string[], put: (key: string, body: Uint8Array) => Promise<void>, prefix: string, parallel = 4): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < ids.length) {
      const id = ids[next++] as string;
      await put(`${prefix}/${id}/model.onnx`, await readFile(join(dir, id, 'model.onnx')));
    }
  };
  await Promise.all(Array.from({ length: parallel }, () => worker()));
}
