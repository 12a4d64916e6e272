import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { wineModelBytes } from '../../common/wine-model.js';

/** A new temp folder laid out as a file:// model store: each model's bytes at `<dir>/<id>/model.onnx`. */
export async function modelFolder(prefix: string, models: Readonly<Record<string, Uint8Array>>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  for (const [id, bytes] of Object.entries(models)) {
    await mkdir(join(dir, id));
    await writeFile(join(dir, id, 'model.onnx'), bytes);
  }
  return dir;
}

/** A model folder of each id's deterministic wine model. */
export function wineModelFolder(prefix: string, ids: readonly string[]): Promise<string> {
  return modelFolder(prefix, Object.fromEntries(ids.map((id) => [id, wineModelBytes(id)])));
}
