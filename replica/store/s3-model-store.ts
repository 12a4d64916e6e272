import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, rmSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { ModelmuxError } from '../../common/errors.js';
import type { Clock } from '../../common/clock.js';
import { idSegment, isArchiveId, type ModelId } from '../../common/model-id.js';
import { isModelVersion } from '../../common/model-version.js';
import { DiskFileCache, type CachedFile } from './disk-file-cache.js';
import { externalDataFiles, relocateExternalData } from '../onnx/external-data.js';
import { MAX_MODEL_CONFIG_BYTES, MODEL_CONFIG_FILE } from './model-config.js';
import { archiveBounds } from './archive-policy.js';
import { extractModel } from './archive-extract.js';
import { folderKey, MAX_LISTED_VERSIONS, modelKey, type FetchSource, type LocalModelFile, type VersionedStore } from './model-store.js';
import type { PeerFiles } from './peer-files.js';

export interface S3StoreOptions {
  uri: string;
  endpoint?: string;
  region: string;
  forcePathStyle?: boolean;
  /** Downloads land in `<cacheDir>/files/`, written to a temp name and renamed. */
  cacheDir: string;
  /** Bytes of downloaded files kept on disk after their load (0: delete each after loading). */
  diskCacheBytes: number;
  /** A disk copy the store confirmed less than this long ago is used without asking again. */
  revalidateAfterMs: number;
  /** A request to the store whose connection stays silent this long fails (and is tried once more). */
  socketTimeoutMs: number;
  /**
   * The downloads of the other replicas of this machine, in a folder on the filesystem of
   * `cacheDir`: a model one of them downloaded is linked from there rather than downloaded again.
   */
  peers?: PeerFiles;
  clock: Clock;
  maxFileBytes?: number;
  onFetch?: (source: FetchSource) => void;
  /**
   * Runs on each download before it is named and used, and may rewrite it in place; answers the
   * file's new size, or undefined when it left the file alone. Used to align a model's weights
   * so they can be mapped (replica/onnx/file-map.ts).
   */
  prepare?: (path: string) => Promise<number | undefined>;
  /** Called as a cached file is deleted, before it is: whatever still maps it lets go (IdleMappings). */
  onRemove?: (path: string) => void;
  /** Models whose files stay when the disk fills up and room is made (the loaded ones). */
  keep?: (id: string) => boolean;
}

const NOT_FOUND = new Set(['NoSuchKey', 'NotFound']);

/** Where the external data files of the download at `path` go: a folder beside it, its own. */
function externalFolder(path: string): string {
  return `${path}.d`;
}

/** A write failed for want of space: the filesystem (or the pod's emptyDir) is full, or a quota bit. */
const DISK_FULL = new Set(['ENOSPC', 'EDQUOT']);

/**
 * Bytes of a download held in memory while the disk catches up (twice: the size check and the
 * file stream each buffer). With the streams' default 16 KiB, every 64 KiB socket read paused
 * the body until a file write came back from the thread pool: two turns of the event loop per
 * chunk, which a busy replica makes long. Measured under uniform traffic in the benchmark:
 * download p90 about 200 → 125 ms, worst 1 s → 0.28 s.
 */
const DOWNLOAD_BUFFER_BYTES = 8 * 1024 * 1024;

/**
 * `s3://bucket/prefix` on AWS or any S3-compatible endpoint. Credentials come from the standard
 * AWS chain (env, shared files, web identity, instance metadata) and never reach a log line.
 * Downloaded files stay on disk (DiskFileCache) and are revalidated by ETag with a HEAD, so a
 * model replaced in the store is downloaded again while an unchanged one is not.
 */
export class S3ModelStore implements VersionedStore {
  readonly uri: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly dir: string;
  private readonly files: DiskFileCache;
  private readonly peers: PeerFiles | undefined;
  /** Deletions of cached files under way: making room waits for them before writing again. */
  private readonly removals = new Set<Promise<void>>();

  constructor(private readonly opts: S3StoreOptions) {
    this.uri = opts.uri;
    const u = new URL(opts.uri);
    this.bucket = u.hostname;
    this.prefix = decodeURIComponent(u.pathname);
    // Absolute: the path is written into records that other processes read (PeerFiles).
    this.dir = resolve(opts.cacheDir, 'files');
    // Files left by an earlier process are not in the index and would fill the volume unseen.
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true });
    this.files = new DiskFileCache(opts.diskCacheBytes, (path) => {
      opts.onRemove?.(path);
      const removal = Promise.all([rm(path, { force: true }), rm(externalFolder(path), { recursive: true, force: true })]).then(
        () => undefined,
        () => undefined,
      );
      this.removals.add(removal);
      void removal.finally(() => this.removals.delete(removal));
    });
    this.peers = opts.peers;
    this.client = new S3Client({
      region: opts.region,
      ...(opts.endpoint !== undefined ? { endpoint: opts.endpoint } : {}),
      forcePathStyle: opts.forcePathStyle ?? opts.endpoint !== undefined,
      // Fail over to 503 quickly when the store is down rather than hold requests for long.
      maxAttempts: 2,
      // A connection that goes silent fails the try, whether the response has not begun or stopped
      // midway: a store that accepts connections and never answers (hung, stopped, a network that
      // drops packets on a pooled connection) held a load, and every request waiting for it, until
      // it came back. The SDK's requestTimeout would not do: by default it only logs a warning.
      requestHandler: { connectionTimeout: 3000, socketTimeout: opts.socketTimeoutMs },
      // The SDK resolves a command's middleware stack once per command class instead of on
      // every send: a revalidating HEAD cost ~850 µs of CPU, ~670 with it. Safe because no
      // middleware is added after the first send and no call passes per-send options.
      cacheMiddleware: true,
    });
  }

  async fetch(id: ModelId, fresh = false): Promise<LocalModelFile> {
    const key = modelKey(this.prefix, id);
    let cached = this.files.checkout(id);
    let source: FetchSource = 'disk';
    if (cached === undefined && this.peers !== undefined) {
      const borrowed = this.peers.borrow(id, this.newPath(id));
      if (borrowed !== undefined) {
        cached = this.files.admit(id, borrowed);
        source = 'peer';
      }
    }
    if (cached !== undefined) {
      const now = this.opts.clock.now();
      // Within the window, a reload costs no request to the store: a HEAD through the SDK
      // costs more CPU than creating the session (docs/adr/0015-replica-load-path.md).
      if (!fresh && now - cached.checkedAt < this.opts.revalidateAfterMs) {
        this.opts.onFetch?.(source);
        return this.local(id, cached, source);
      }
      let etag: string;
      try {
        etag = await this.currentEtag(key, id);
      } catch (err) {
        const gone = err instanceof ModelmuxError && err.code === 'model_not_found';
        if (gone) {
          this.files.settle(id, cached, false);
          throw err;
        }
        this.opts.onFetch?.('disk_unverified');
        return this.local(id, cached, 'disk_unverified');
      }
      if (etag !== '' && etag === cached.etag) {
        this.files.confirm(cached, now);
        this.opts.onFetch?.(source);
        return this.local(id, cached, source);
      }
      this.files.settle(id, cached, false);
    }
    const file = this.files.admit(id, await this.download(key, id));
    this.opts.onFetch?.('store');
    return this.local(id, file, 'store');
  }

  /**
   * Once onnxruntime accepts the file, it is named to the neighbours (PeerFiles) when it was
   * downloaded or borrowed, once each; not when a HEAD merely confirms a file again: rewriting
   * the record each time (a file write and a rename) took 4–6% of a loading replica's time under
   * one-hot traffic, where a neighbour needs the record only for its first borrow.
   */
  private local(id: ModelId, file: CachedFile, source: FetchSource): LocalModelFile {
    const share = source === 'store' || source === 'peer';
    return {
      path: file.path,
      bytes: file.bytes,
      private: true,
      source,
      ...(file.config !== undefined ? { config: file.config } : {}),
      ...(file.etag !== '' ? { version: { tag: file.etag, checkedAt: file.checkedAt } } : {}),
      settle: (ok) => {
        // Not named to neighbours with external data files (a borrow links one file) or a
        // config.json (held in this process's memory): they download their own.
        if (ok && share && file.config === undefined && !existsSync(externalFolder(file.path))) this.peers?.publish(id, file);
        this.files.settle(id, file, ok);
      },
    };
  }

  /** A name of its own per file: deleting an old version can never hit a newer one. */
  private newPath(id: ModelId): string {
    return join(this.dir, `${idSegment(id)}.${randomBytes(6).toString('hex')}.onnx`);
  }

  /** The models whose files are on disk, most recently used first, at most `limit`. */
  diskIds(limit: number): string[] {
    return this.files.ids(limit);
  }

  /** The object's ETag now, as a HEAD reports it; '' when the store gives none. */
  version(id: ModelId): Promise<string> {
    return this.currentEtag(modelKey(this.prefix, id), id);
  }

  /** The numeric "folders" (common prefixes) under `<prefix>/<base>/`: one listing request, one page. */
  async listVersions(base: ModelId): Promise<string[]> {
    const folder = `${folderKey(this.prefix, base)}/`;
    try {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: folder, Delimiter: '/', MaxKeys: MAX_LISTED_VERSIONS }));
      return (page.CommonPrefixes ?? []).flatMap((c) => {
        const name = c.Prefix?.slice(folder.length, -1) ?? '';
        return isModelVersion(name) ? [name] : [];
      });
    } catch (err) {
      const e = this.translate(err, base);
      throw e.code === 'model_not_found' ? new ModelmuxError('store_unavailable', e.message) : e;
    }
  }

  /** The object's version as HEAD reports it; '' when the store gives none (never matches). */
  private async currentEtag(key: string, id: ModelId): Promise<string> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return out.ETag ?? '';
    } catch (err) {
      throw this.translate(err, id);
    }
  }

  /**
   * Downloads `id`. When the disk is full, drops the files of models this replica does not hold
   * loaded (they are kept only for reloads) and tries once more; then `cache_full`, not
   * `store_unavailable`: the store is fine. A partial file is never left behind or cached.
   */
  private async download(key: string, id: ModelId): Promise<CachedFile> {
    let full: ModelmuxError;
    try {
      return await this.downloadOnce(key, id);
    } catch (err) {
      if (!(err instanceof ModelmuxError && err.code === 'cache_full')) throw err;
      full = err;
    }
    const dropped = this.files.shed(this.opts.keep ?? (() => false));
    await Promise.all([...this.removals]);
    if (dropped > 0) {
      try {
        return await this.downloadOnce(key, id);
      } catch (err) {
        if (!(err instanceof ModelmuxError && err.code === 'cache_full')) throw err;
        full = err;
      }
    }
    const tried = dropped > 0 ? `even after dropping ${dropped} bytes of files of models not loaded` : 'and no file of a model not loaded was left to drop';
    throw new ModelmuxError('cache_full', `${full.message}, ${tried}`, { cause: full.cause });
  }

  private async downloadOnce(key: string, id: ModelId): Promise<CachedFile> {
    let body: Readable;
    let length: number | undefined;
    let etag: string;
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (!(out.Body instanceof Readable)) throw new Error('the S3 response has no body stream');
      body = out.Body;
      length = out.ContentLength;
      etag = out.ETag ?? '';
    } catch (err) {
      throw this.translate(err, id);
    }
    const max = this.opts.maxFileBytes;
    if (max !== undefined && length !== undefined && length > max) {
      body.destroy();
      throw new ModelmuxError('model_too_large', `model "${id}" weighs ${length} bytes, more than the ${max} allowed`);
    }
    const path = this.newPath(id);
    const tmp = `${path}.tmp`;
    let bytes = 0;
    let config: Uint8Array | undefined;
    const limit = new Transform({
      highWaterMark: DOWNLOAD_BUFFER_BYTES,
      transform(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        if (max !== undefined && bytes > max) cb(new ModelmuxError('model_too_large', `model "${id}" is larger than the ${max} bytes allowed`));
        else cb(null, chunk);
      },
    });
    try {
      if (isArchiveId(id)) return await this.unpack(body, key, path, etag);
      await pipeline(body, limit, createWriteStream(tmp, { mode: 0o600, highWaterMark: DOWNLOAD_BUFFER_BYTES }));
      const external = await this.downloadExternalData(key, id, tmp, path, max === undefined ? undefined : max - bytes);
      bytes = ((await this.opts.prepare?.(tmp)) ?? external?.modelBytes ?? bytes) + (external?.bytes ?? 0);
      config = await this.downloadConfig(key, id);
      await rename(tmp, path);
    } catch (err) {
      await Promise.all([rm(tmp, { force: true }), rm(externalFolder(path), { recursive: true, force: true })]);
      if (err instanceof ModelmuxError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== undefined && DISK_FULL.has(code)) throw new ModelmuxError('cache_full', `no room in ${this.dir} for model "${id}" (${length ?? 'unknown'} bytes): ${code}`, { cause: err });
      throw new ModelmuxError('store_unavailable', `download of "${id}" from ${this.uri} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    return { path, bytes, etag, checkedAt: this.opts.clock.now(), ...(config !== undefined ? { config } : {}) };
  }

  /**
   * The model in the archive `body` at `key`, moved to `path`; bounded by the archive's own bounds
   * (archive-policy.ts). The caller removes `<path>.tmp` if this throws.
   */
  private async unpack(body: Readable, key: string, path: string, etag: string): Promise<CachedFile> {
    const tmp = `${path}.tmp`;
    const max = this.opts.maxFileBytes;
    const model = await extractModel(body, `archive "${key}"`, `${path}.x`, tmp, archiveBounds(max));
    if (max !== undefined && model.bytes > max) throw new ModelmuxError('model_too_large', `the model in archive "${key}" weighs ${model.bytes} bytes, more than the ${max} allowed`);
    const bytes = (await this.opts.prepare?.(tmp)) ?? model.bytes;
    await rename(tmp, path);
    return { path, bytes, etag, checkedAt: this.opts.clock.now(), ...(model.config !== undefined ? { config: model.config } : {}) };
  }

  /** The model's config.json beside its model.onnx, or undefined when it has none. */
  private async downloadConfig(key: string, id: ModelId): Promise<Uint8Array | undefined> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key.slice(0, key.lastIndexOf('/') + 1) + MODEL_CONFIG_FILE }));
      if ((out.ContentLength ?? 0) > MAX_MODEL_CONFIG_BYTES) {
        out.Body?.transformToWebStream()
          .cancel()
          .catch(() => undefined);
        throw new ModelmuxError('model_load_failed', `${MODEL_CONFIG_FILE} of model "${id}" is ${out.ContentLength} bytes, more than the ${MAX_MODEL_CONFIG_BYTES} allowed`);
      }
      return (await out.Body?.transformToByteArray()) ?? new Uint8Array(0);
    } catch (err) {
      if (err instanceof ModelmuxError) throw err;
      const e = this.translate(err, id);
      if (e.code === 'model_not_found') return undefined;
      throw e;
    }
  }

  /**
   * Downloads the external data files the model at `tmp` names (objects beside its model.onnx)
   * into the folder of the download at `path`, and points the model at them there; undefined for
   * a model that holds its weights. The model is read whole to find them: it was just written,
   * so from the page cache, and a model with external data is small.
   */
  private async downloadExternalData(key: string, id: ModelId, tmp: string, path: string, budget: number | undefined): Promise<{ modelBytes: number; bytes: number } | undefined> {
    const model = await readFile(tmp);
    const files = externalDataFiles(model);
    if (files.length === 0) return undefined;
    const folder = externalFolder(path);
    const base = key.slice(0, key.lastIndexOf('/') + 1);
    let bytes = 0;
    for (const location of files) {
      let body: Readable;
      let length: number | undefined;
      try {
        const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: base + location }));
        if (!(out.Body instanceof Readable)) throw new Error('the S3 response has no body stream');
        body = out.Body;
        length = out.ContentLength;
      } catch (err) {
        const e = this.translate(err, id);
        if (e.code === 'model_not_found') throw new ModelmuxError('model_load_failed', `model "${id}" names the external data file "${location}", which is not beside its model.onnx in ${this.uri}`);
        throw e;
      }
      bytes += length ?? 0;
      if (budget !== undefined && bytes > budget) {
        body.destroy();
        throw new ModelmuxError('model_too_large', `model "${id}" with its external data weighs more than the ${this.opts.maxFileBytes} bytes allowed`);
      }
      const target = join(folder, location);
      await mkdir(dirname(target), { recursive: true });
      await pipeline(body, createWriteStream(target, { mode: 0o600, highWaterMark: DOWNLOAD_BUFFER_BYTES }));
    }
    const relocated = relocateExternalData(model, basename(folder));
    await writeFile(tmp, relocated);
    return { modelBytes: relocated.length, bytes };
  }

  destroy(): void {
    this.client.destroy();
  }

  private translate(err: unknown, id: ModelId): ModelmuxError {
    const name = err instanceof Error ? err.name : '';
    const status = err instanceof S3ServiceException ? err.$metadata.httpStatusCode : undefined;
    if (name !== 'NoSuchBucket' && (NOT_FOUND.has(name) || status === 404)) return new ModelmuxError('model_not_found', `no model "${id}" in ${this.uri}`);
    const what = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    return new ModelmuxError('store_unavailable', `model store ${this.uri} unavailable: ${what}`, { cause: err });
  }
}
