import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Bytes of every regular file in a model's folder of a file:// store, model.onnx included: what
 * loading it may read (external data files sit beside the model, under any relative name).
 * Symbolic links are not followed, so a folder cannot count what lies outside it.
 */
export async function folderBytes(dir: string): Promise<number> {
  let bytes = 0;
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) bytes += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return bytes;
}
