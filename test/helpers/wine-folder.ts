import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { wineModelBytes } from '../../common/wine-model.js';

/** A new temp folder laid out as a file:// model store: each id's deterministic wine model at `<dir>/<id>/model.onnx`. */
export async function wineModelFolder(prefix: string, ids: readonly string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  for (const id of ids) {
    await mkdir(join(dir, id));
    await writeFile(join(dir, id, 'model.onnx'), wineModelBytes(id));
  }
  return dir;
}
