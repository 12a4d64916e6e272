import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { ModelmuxError } from '../../common/errors.js';
import { idSegment, isArchiveId, type ModelId } from '../../common/model-id.js';
import { extractFolder } from './archive-extract.js';
import { archiveBounds } from './archive-policy.js';
import { folderKey, modelFolder } from './model-store.js';

/**
 * Sidecar mode's store: a model is the whole folder `<source>/<ID>/` (a runtime's layout, e.g.
 * MLServer's model-settings.json beside the model file, or Triton's config.pbtxt and 1/), copied
 * into `<modelsDir>/<ID>/` where the runtime reads it. Runtimes find models by scanning their
 * repository for settings files, so those are written last, each file under a temporary name
 * renamed when complete: a runtime never reads half a folder. Version V (the model `ID@V`) is
 * the folder `<source>/<ID>/V/`, copied as a model of its own into `<modelsDir>/<ID@V>/`; the
 * default version's copy keeps its numeric folders, which are the runtime's own versions in
 * Triton's layout. A model whose id is an archive key (`<ID>.tar.gz`, SageMaker's artifact) is
 * that archive unpacked into `<modelsDir>/<ID>/`, by the same rules and bounds as the replica's
 * own archives (archive-policy.ts): regular files only, settings files last.
 */
export interface ModelFolders {
  readonly uri: string;
  /** Answers the bytes copied; throws ModelmuxError `model_not_found`, `store_unavailable` or `model_too_large`. */
  fetch(id: ModelId): Promise<number>;
  remove(id: ModelId): Promise<void>;
}

/** Files a runtime scans for: written after every other file of the folder. */
const SETTINGS_FILES = new Set(['model-settings.json', 'config.pbtxt']);

/** The order files are written in: settings files last. */
export function writeOrder(paths: readonly string[]): string[] {
  const last = (p: string): number => (SETTINGS_FILES.has(p.split('/').pop() ?? '') ? 1 : 0);
  return [...paths].sort((a, b) => last(a) - last(b) || a.localeCompare(b));
}

export interface ModelFoldersOptions {
  uri: string;
  modelsDir: string;
  maxBytes?: number;
  s3?: { region: string; endpoint?: string; forcePathStyle?: boolean; socketTimeoutMs: number };
}

export function modelFolders(opts: ModelFoldersOptions): ModelFolders {
  return opts.uri.startsWith('s3://') ? new S3Folders(opts) : new FileFolders(opts);
}

abstract class Folders implements ModelFolders {
  readonly uri: string;
  constructor(protected readonly opts: ModelFoldersOptions) {
    this.uri = opts.uri;
  }

  abstract fetch(id: ModelId): Promise<number>;

  async remove(id: ModelId): Promise<void> {
    await rm(join(this.opts.modelsDir, idSegment(id)), { recursive: true, force: true });
  }

  /** Unpacks the archive `body` of model `id` into its folder; answers the bytes written. */
  protected async unpackInto(id: ModelId, body: Readable): Promise<number> {
    const dest = join(this.opts.modelsDir, idSegment(id));
    await rm(dest, { recursive: true, force: true });
    const isSettings = (path: string): boolean => SETTINGS_FILES.has(path.split('/').pop() ?? '');
    try {
      const bytes = await extractFolder(body, `archive "${id}" in ${this.uri}`, dest, archiveBounds(this.opts.maxBytes), isSettings);
      this.checkSize(id, bytes);
      return bytes;
    } catch (err) {
      await rm(dest, { recursive: true, force: true });
      if (err instanceof ModelmuxError) throw err;
      throw new ModelmuxError('store_unavailable', `cannot unpack model "${id}" from ${this.uri}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }

  protected checkSize(id: ModelId, bytes: number): void {
    if (this.opts.maxBytes !== undefined && bytes > this.opts.maxBytes) {
      throw new ModelmuxError('model_too_large', `model "${id}" weighs ${bytes} bytes, more than the ${this.opts.maxBytes} allowed`);
    }
  }

  /** Writes each file of the folder through `write(relativePath, tempPath)`, settings files last. */
  protected async copyInto(id: ModelId, paths: readonly string[], write: (path: string, temp: string) => Promise<void>): Promise<void> {
    const dest = join(this.opts.modelsDir, idSegment(id));
    await rm(dest, { recursive: true, force: true });
    try {
      for (const path of writeOrder(paths)) {
        const target = join(dest, ...path.split('/'));
        await mkdir(dirname(target), { recursive: true });
        const temp = `${target}.part`;
        await write(path, temp);
        await rename(temp, target);
      }
    } catch (err) {
      await rm(dest, { recursive: true, force: true });
      if (err instanceof ModelmuxError) throw err;
      throw new ModelmuxError('store_unavailable', `cannot copy model "${id}" from ${this.uri}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}

/** `file:///dir`: copied, since the runtime's folder is another volume in a pod. */
class FileFolders extends Folders {
  async fetch(id: ModelId): Promise<number> {
    const src = join(fileURLToPath(this.uri), ...modelFolder(id).split('/'));
    if (isArchiveId(id)) return this.unpackInto(id, await openFile(id, src, this.uri));
    const files: { path: string; bytes: number }[] = [];
    try {
      for (const entry of await readdir(src, { recursive: true, withFileTypes: true })) {
        if (!entry.isFile()) continue;
        const full = join(entry.parentPath, entry.name);
        files.push({ path: relative(src, full).split(sep).join('/'), bytes: (await stat(full)).size });
      }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
      throw new ModelmuxError('store_unavailable', `cannot read ${this.uri}: ${code ?? String(err)}`, { cause: err });
    }
    if (files.length === 0) throw new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
    const bytes = files.reduce((n, f) => n + f.bytes, 0);
    this.checkSize(id, bytes);
    await this.copyInto(
      id,
      files.map((f) => f.path),
      (path, temp) => copyFile(join(src, ...path.split('/')), temp),
    );
    return bytes;
  }
}

/** The archive file at `path`, open; model_not_found when there is none. */
async function openFile(id: ModelId, path: string, uri: string): Promise<Readable> {
  const stream = createReadStream(path);
  await new Promise<void>((resolve, reject) => {
    stream.once('open', () => resolve());
    stream.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'ENOENT' || err.code === 'EISDIR'
          ? new ModelmuxError('model_not_found', `no model "${id}" in ${uri}`)
          : new ModelmuxError('store_unavailable', `cannot read ${uri}: ${err.code ?? err.message}`),
      ),
    );
  });
  return stream;
}

/** `s3://bucket/prefix`: every object under `<prefix>/<ID>/`, or the archive `<prefix>/<ID>`. */
class S3Folders extends Folders {
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(opts: ModelFoldersOptions) {
    super(opts);
    const u = new URL(opts.uri);
    this.bucket = u.hostname;
    this.prefix = decodeURIComponent(u.pathname).replace(/^\/+|\/+$/g, '');
    const s3 = opts.s3 ?? { region: 'us-east-1', socketTimeoutMs: 10_000 };
    this.client = new S3Client({
      region: s3.region,
      ...(s3.endpoint !== undefined ? { endpoint: s3.endpoint } : {}),
      forcePathStyle: s3.forcePathStyle ?? s3.endpoint !== undefined,
      maxAttempts: 2,
      requestHandler: { connectionTimeout: 3000, socketTimeout: s3.socketTimeoutMs },
    });
  }

  async fetch(id: ModelId): Promise<number> {
    if (isArchiveId(id)) return this.unpackInto(id, await this.archive(id));
    const folder = `${folderKey(this.prefix, id)}/`;
    const objects = new Map<string, number>();
    try {
      let token: string | undefined;
      do {
        const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: folder, ...(token !== undefined ? { ContinuationToken: token } : {}) }));
        for (const o of page.Contents ?? []) if (o.Key !== undefined && !o.Key.endsWith('/')) objects.set(o.Key.slice(folder.length), o.Size ?? 0);
        token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
      } while (token !== undefined);
    } catch (err) {
      throw new ModelmuxError('store_unavailable', `cannot list ${this.uri}/${id}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    if (objects.size === 0) throw new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
    const paths = [...objects.keys()];
    if (paths.some((p) => p.split('/').some((part) => part === '..' || part === ''))) {
      throw new ModelmuxError('model_load_failed', `model "${id}" has an object whose name leaves its folder`);
    }
    const bytes = [...objects.values()].reduce((n, b) => n + b, 0);
    this.checkSize(id, bytes);
    await this.copyInto(id, paths, async (path, temp) => {
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: folder + path }));
      if (!(got.Body instanceof Readable)) throw new Error(`no body for ${folder + path}`);
      await pipeline(got.Body, createWriteStream(temp));
    });
    return bytes;
  }

  /** The archive object of model `id`, its body streaming. */
  private async archive(id: ModelId): Promise<Readable> {
    try {
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: folderKey(this.prefix, id) }));
      if (!(got.Body instanceof Readable)) throw new Error('the S3 response has no body stream');
      return got.Body;
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status === 404 || (err instanceof Error && err.name === 'NoSuchKey')) throw new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
      throw new ModelmuxError('store_unavailable', `cannot read ${this.uri}/${id}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}
