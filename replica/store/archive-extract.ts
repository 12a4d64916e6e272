import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract as tarExtract } from 'tar-stream';
import { ModelmuxError } from '../../common/errors.js';
import { MAX_MODEL_CONFIG_BYTES } from './model-config.js';
import { chooseModel, entryDecision, isModelEntry, type ArchiveBounds } from './archive-policy.js';

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

/** Writes one kept entry (its checked relative `path`) from `entry`. */
type EntryWriter = (path: string, entry: Readable) => Promise<void>;

/**
 * Reads the gzip-compressed tar `archive` as it streams in (`what` names it in errors) and hands
 * each entry the policy keeps (`wanted`) to `write`, one at a time. Throws ModelmuxError
 * `archive_invalid` for anything wrong with the archive, and rethrows the stream's own errors (the
 * store's, the disk's) as they are; the caller removes what `write` wrote.
 */
async function readArchive(archive: Readable, what: string, bounds: ArchiveBounds, wanted: (path: string) => boolean, write: EntryWriter): Promise<void> {
  let sourceFailed = false;
  archive.once('error', () => (sourceFailed = true));
  const extract = tarExtract();
  const feed = pipeline(archive, byteLimit(bounds.maxArchiveBytes, what), createGunzip(), byteLimit(bounds.maxUnpackedBytes, `${what} unpacked`), extract);
  // Observed below: a refusal destroys the parser, which fails the feed too.
  feed.catch(() => undefined);
  const seen = new Set<string>();
  const progress = { entries: 0, declaredBytes: 0 };
  try {
    for await (const entry of extract) {
      const d = entryDecision(entry.header, progress, bounds, wanted);
      progress.entries++;
      progress.declaredBytes += entry.header.size ?? 0;
      if (d.action === 'refuse') throw new ModelmuxError('archive_invalid', `${what}: ${d.reason}`);
      if (d.action === 'skip' || seen.has(d.path)) {
        entry.resume();
        continue;
      }
      seen.add(d.path);
      await write(d.path, entry as unknown as Readable);
    }
    await feed;
  } catch (err) {
    archive.destroy();
    extract.destroy();
    await feed.catch(() => undefined);
    if (err instanceof ModelmuxError || sourceFailed || isFileSystemError(err)) throw err;
    // gunzip's and the tar parser's own reasons: not gzip, truncated, a malformed header.
    throw new ModelmuxError('archive_invalid', `${what} is not a readable gzip-compressed tar: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

async function writeFileFrom(entry: Readable, file: string): Promise<number> {
  await pipeline(entry, createWriteStream(file, { mode: 0o600 }));
  return (await stat(file)).size;
}

/**
 * The model in the archive: writes the entries that may be the model or its config into `folder`
 * (which it creates and removes again) under names of its own, so no entry name reaches the file
 * system, and moves the chosen model to `modelPath`. Throws as readArchive does, and
 * `archive_invalid` when no single model is in it; nothing of a broken archive is left behind.
 */
export async function extractModel(archive: Readable, what: string, folder: string, modelPath: string, bounds: ArchiveBounds): Promise<ExtractedModel> {
  await mkdir(folder, { recursive: true, mode: 0o700 });
  const kept = new Map<string, string>();
  try {
    await readArchive(archive, what, bounds, isModelEntry, async (path, entry) => {
      const file = join(folder, `${kept.size}.entry`);
      kept.set(path, file);
      await writeFileFrom(entry, file);
    });
    const choice = chooseModel([...kept.keys()]);
    if ('reason' in choice) throw new ModelmuxError('archive_invalid', `${what}: ${choice.reason}`);
    const config = choice.config === undefined ? undefined : await readConfig(kept.get(choice.config) as string, what);
    const source = kept.get(choice.model) as string;
    const { size } = await stat(source);
    await rename(source, modelPath);
    return { bytes: size, ...(config !== undefined ? { config } : {}) };
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

/**
 * The whole archive as a sidecar runtime's model folder: every regular file at its own (checked)
 * path below `dest`, which must not exist yet. Each file is written under a temporary name and
 * renamed when complete, the files `isLast` names (a runtime's settings files, which it scans for)
 * only once every other file is in place, so a runtime never reads half a folder. Answers the
 * bytes written; on any failure removes `dest` and throws as readArchive does.
 */
export async function extractFolder(archive: Readable, what: string, dest: string, bounds: ArchiveBounds, isLast: (path: string) => boolean): Promise<number> {
  const held: [string, string][] = [];
  let bytes = 0;
  try {
    await readArchive(
      archive,
      what,
      bounds,
      () => true,
      async (path, entry) => {
        const target = join(dest, ...path.split('/'));
        await mkdir(dirname(target), { recursive: true });
        const temp = `${target}.part`;
        bytes += await writeFileFrom(entry, temp);
        if (isLast(path)) held.push([temp, target]);
        else await rename(temp, target);
      },
    );
    for (const [temp, target] of held) await rename(temp, target);
    return bytes;
  } catch (err) {
    await rm(dest, { recursive: true, force: true });
    throw err;
  }
}

async function readConfig(file: string, what: string): Promise<Uint8Array> {
  const bytes = await readFile(file);
  if (bytes.length > MAX_MODEL_CONFIG_BYTES) throw new ModelmuxError('archive_invalid', `${what}: its config.json is ${bytes.length} bytes, more than the ${MAX_MODEL_CONFIG_BYTES} allowed`);
  return bytes;
}
