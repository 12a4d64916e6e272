import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModelmuxError } from '../common/errors.js';
import type { ModelId } from '../common/model-id.js';
import { MODEL_FILE, type LocalModelFile, type ModelStore } from './model-store.js';

/** `file:///dir`: models are read in place, no copy (local mode and tests). */
export class FileModelStore implements ModelStore {
  private readonly root: string;

  constructor(readonly uri: string, private readonly maxFileBytes: number | undefined) {
    this.root = fileURLToPath(uri);
  }

  async fetch(id: ModelId): Promise<LocalModelFile> {
    const path = join(this.root, id, MODEL_FILE);
    try {
      const s = await stat(path);
      if (!s.isFile()) throw new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
      if (this.maxFileBytes !== undefined && s.size > this.maxFileBytes) {
        throw new ModelmuxError('model_too_large', `model "${id}" weighs ${s.size} bytes, more than the ${this.maxFileBytes} allowed`);
      }
      return { path, bytes: s.size };
    } catch (err) {
      if (err instanceof ModelmuxError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
      throw new ModelmuxError('store_unavailable', `cannot read ${this.uri}: ${code ?? String(err)}`, { cause: err });
    }
  }
}
