import { readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';

/**
 * Bytes of every regular file in a model's folder of a file:// store, model.onnx included: what
 * loading it may read (external data files sit beside the model, under any relative name).
 * Symbolic links are not followed, so a folder cannot count what lies outside it. Files under a
 * top-level folder `skipFolder` names are not counted (the version folders below a default
 * version, which are models of their own).
 */
export async function folderBytes(dir: string, skipFolder: (name: string) => boolean = () => false): Promise<number> {
  let bytes = 0;
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const top = relative(dir, entry.parentPath).split(sep)[0] ?? '';
    if (top !== '' && skipFolder(top)) continue;
    bytes += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return bytes;
}
