import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModelmuxError } from '../../common/errors.js';
import { isArchiveId, type ModelId } from '../../common/model-id.js';
import { isModelVersion, splitModelId } from '../../common/model-version.js';
import type { Clock } from '../../common/clock.js';
import { folderBytes } from './folder-bytes.js';
import { MODEL_CONFIG_FILE } from './model-config.js';
import { MAX_LISTED_VERSIONS, MODEL_FILE, modelFolder, type LocalModelFile, type VersionedStore } from './model-store.js';

/**
 * `file:///dir`: models are read in place, no copy (local mode and tests). A file's version is
 * its inode, size and modification time: a file overwritten in place or replaced by a rename
 * (even one keeping the old modification time) gets a new one. Version V of a model (`ID@V`)
 * is the folder `<dir>/<ID>/<V>/`, a model of its own.
 */
export class FileModelStore implements VersionedStore {
  private readonly root: string;

  constructor(
    readonly uri: string,
    private readonly maxFileBytes: number | undefined,
    private readonly clock: Clock,
  ) {
    this.root = fileURLToPath(uri);
  }

  async fetch(id: ModelId): Promise<LocalModelFile> {
    // Unpacking needs a cache folder of the replica's own, which only the S3 store keeps.
    if (isArchiveId(id)) throw new ModelmuxError('archive_invalid', `model "${id}" is an archive: archives are read from an s3:// store; in a folder, unpack it as ${id}/${MODEL_FILE}`);
    const { path, size: modelBytes, tag } = await this.stat(id);
    // External data files beside model.onnx count as the model's size (a folder gone since the
    // stat leaves the load to fail on the file); a default version's version folders do not.
    const isDefault = splitModelId(id).version === undefined;
    const size = await folderBytes(this.folder(id), (name) => isDefault && isModelVersion(name)).catch(() => modelBytes);
    if (this.maxFileBytes !== undefined && size > this.maxFileBytes) {
      throw new ModelmuxError('model_too_large', `model "${id}" weighs ${size} bytes, more than the ${this.maxFileBytes} allowed`);
    }
    const config = await this.config(id);
    return { path, bytes: size, version: { tag, checkedAt: this.clock.now() }, ...(config ? { config } : {}) };
  }

  async version(id: ModelId): Promise<string> {
    return (await this.stat(id)).tag;
  }

  /** The numeric sub-folders of `<dir>/<base>/` (none when it has no folder). */
  async listVersions(base: ModelId): Promise<string[]> {
    try {
      const entries = await readdir(this.folder(base), { withFileTypes: true });
      return entries
        .filter((e) => e.isDirectory() && isModelVersion(e.name))
        .slice(0, MAX_LISTED_VERSIONS)
        .map((e) => e.name);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return [];
      throw new ModelmuxError('store_unavailable', `cannot read ${this.uri}: ${code ?? String(err)}`, { cause: err });
    }
  }

  private folder(id: ModelId): string {
    return join(this.root, ...modelFolder(id).split('/'));
  }

  /** The model's config.json, or undefined when it has none. */
  private async config(id: ModelId): Promise<Uint8Array | undefined> {
    try {
      return await readFile(join(this.folder(id), MODEL_CONFIG_FILE));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return undefined;
      throw new ModelmuxError('store_unavailable', `cannot read ${MODEL_CONFIG_FILE} of "${id}" in ${this.uri}: ${code ?? String(err)}`, { cause: err });
    }
  }

  private async stat(id: ModelId): Promise<{ path: string; size: number; tag: string }> {
    const path = join(this.folder(id), MODEL_FILE);
    try {
      const s = await stat(path, { bigint: true });
      if (!s.isFile()) throw new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
      return { path, size: Number(s.size), tag: `${s.ino}-${s.size}-${s.mtimeNs}` };
    } catch (err) {
      if (err instanceof ModelmuxError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
      throw new ModelmuxError('store_unavailable', `cannot read ${this.uri}: ${code ?? String(err)}`, { cause: err });
    }
  }
}
