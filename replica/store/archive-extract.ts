import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract as tarExtract } from 'tar-stream';
import { ModelmuxError } from '../../common/errors.js';
import { MAX_MODEL_CONFIG_BYTES } from './model-config.js';
import { chooseModel, entryDecision, type ArchiveBounds } from './archive-policy.js';

/** The model an archive held, moved to the path asked for. */
export interface ExtractedModel {
  /** Bytes of the model file. */
  bytes: number;
  /** The config.json beside the model in the archive, if any. */
  config?: Uint8Array;
}

/** Errors of the file system (errno codes: ENOSPC becomes cache_full upstream), which are the disk's, not the archive's; Node's own `ERR_*` are not. */
function isFileSystemError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code);
}

/** A pass-through that fails once more than `max` bytes went through it. */
function byteLimit(max: number, what: string): Transform {
  let bytes = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      if (bytes > max) cb(new ModelmuxError('archive_invalid', `${what} is larger than the ${max} bytes allowed`));
      else cb(null, chunk);
    },
  });
}

/**
 * Reads the gzip-compressed tar `archive` as it streams in (`what` names it in errors), writes the
 * entries the policy keeps into `folder` (which it creates and removes again), and moves the
 * chosen model to `modelPath`. Throws ModelmuxError `archive_invalid` for anything wrong with the
 * archive, and rethrows the stream's own errors (the store's, the disk's) as they are, so nothing
 * of a broken archive is ever left to be cached.
 */
export async function extractModel(archive: Readable, what: string, folder: string, modelPath: string, bounds: ArchiveBounds): Promise<ExtractedModel> {
  let sourceFailed = false;
  archive.once('error', () => (sourceFailed = true));
  await mkdir(folder, { recursive: true, mode: 0o700 });
  const extract = tarExtract();
  const feed = pipeline(archive, byteLimit(bounds.maxArchiveBytes, what), createGunzip(), byteLimit(bounds.maxUnpackedBytes, `${what} unpacked`), extract);
  // Observed below: a refusal destroys the parser, which fails the feed too.
  feed.catch(() => undefined);
  const kept = new Map<string, string>();
  const progress = { entries: 0, declaredBytes: 0 };
  try {
    for await (const entry of extract) {
      const d = entryDecision(entry.header, progress, bounds);
      progress.entries++;
      progress.declaredBytes += entry.header.size ?? 0;
      if (d.action === 'refuse') throw new ModelmuxError('archive_invalid', `${what}: ${d.reason}`);
      if (d.action === 'skip' || kept.has(d.path)) {
        entry.resume();
        continue;
      }
      // A name of the replica's own: the entry's name never reaches the file system.
      const file = join(folder, `${kept.size}.entry`);
      kept.set(d.path, file);
      await pipeline(entry, createWriteStream(file, { mode: 0o600 }));
    }
    await feed;
    const choice = chooseModel([...kept.keys()]);
    if ('reason' in choice) throw new ModelmuxError('archive_invalid', `${what}: ${choice.reason}`);
    const config = choice.config === undefined ? undefined : await readConfig(kept.get(choice.config) as string, what);
    const source = kept.get(choice.model) as string;
    const { size } = await stat(source);
    await rename(source, modelPath);
    return { bytes: size, ...(config !== undefined ? { config } : {}) };
  } catch (err) {
    archive.destroy();
    extract.destroy();
    await feed.catch(() => undefined);
    if (err instanceof ModelmuxError || sourceFailed || isFileSystemError(err)) throw err;
    // gunzip's and the tar parser's own reasons: not gzip, truncated, a malformed header.
    throw new ModelmuxError('archive_invalid', `${what} is not a readable gzip-compressed tar: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

async function readConfig(file: string, what: string): Promise<Uint8Array> {
  const bytes = await readFile(file);
  if (bytes.length > MAX_MODEL_CONFIG_BYTES) throw new ModelmuxError('archive_invalid', `${what}: its config.json is ${bytes.length} bytes, more than the ${MAX_MODEL_CONFIG_BYTES} allowed`);
  return bytes;
}
