import { MODEL_FILE } from './model-store.js';
import { MODEL_CONFIG_FILE } from './model-config.js';

/**
 * What the replica takes from a model archive (`model.tar.gz`, SageMaker's artifact format) and
 * what it refuses, decided entry by entry before any byte of an entry is written. Pure: the
 * streaming of the archive is replica/store/archive-extract.ts.
 *
 * An archive is untrusted input: it is read by a vetted parser (tar-stream, gunzip from node:zlib)
 * and only regular files are ever written, under names the replica makes up, so no entry name can
 * point outside the folder; links are refused outright rather than resolved; the gzip stream, the
 * entries and their count are bounded (docs/limits.md).
 */

export interface ArchiveBounds {
  /** Bytes of the archive object as stored (gzip-compressed). */
  maxArchiveBytes: number;
  /** Bytes of the tar stream once gunzipped, headers included: a decompression bomb stops here. */
  maxUnpackedBytes: number;
  /** Entries of any kind, directories included. */
  maxEntries: number;
}

/** The bounds when the replica has no --max-model-bytes: an archive of 4 GiB, 8 GiB unpacked, 10,000 entries. */
export const DEFAULT_ARCHIVE_BOUNDS: ArchiveBounds = { maxArchiveBytes: 4 * 1024 ** 3, maxUnpackedBytes: 8 * 1024 ** 3, maxEntries: 10_000 };

/** The bounds of a replica whose models may weigh `maxModelBytes`: the archive as much, unpacked twice as much. */
export function archiveBounds(maxModelBytes: number | undefined): ArchiveBounds {
  if (maxModelBytes === undefined) return DEFAULT_ARCHIVE_BOUNDS;
  return { ...DEFAULT_ARCHIVE_BOUNDS, maxArchiveBytes: maxModelBytes, maxUnpackedBytes: 2 * maxModelBytes };
}

/** The parts of a tar header the policy reads (tar-stream's Header). */
export interface EntryHeader {
  name: string;
  type: string | null;
  size?: number | null | undefined;
}

/** What was read of the archive before this entry. */
export interface ArchiveProgress {
  entries: number;
  /** Sum of the sizes the headers declared. */
  declaredBytes: number;
}

export type EntryDecision = { action: 'keep'; path: string } | { action: 'skip' } | { action: 'refuse'; reason: string };

/** Deepest entry path read; deeper is refused, as no model archive needs it. */
const MAX_DEPTH = 16;

/** The entry's path with its `./` prefixes gone, or why it is refused. */
function entryPath(name: string): { path: string } | { reason: string } {
  if (name.includes('\0') || name.includes('\\')) return { reason: `entry "${name}" has a NUL or a backslash in its name` };
  if (name.startsWith('/')) return { reason: `entry "${name}" has an absolute path` };
  const segments = name.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) return { reason: `entry "${name}" climbs out of the archive's folder` };
  if (segments.length > MAX_DEPTH) return { reason: `entry "${name}" is more than ${MAX_DEPTH} folders deep` };
  return { path: segments.join('/') };
}

/** Whether an entry at `path` may be the model or its config (the rest of an archive is read past, unwritten). */
export function isModelEntry(path: string): boolean {
  return path.endsWith('.onnx') || path === MODEL_CONFIG_FILE || path.endsWith(`/${MODEL_CONFIG_FILE}`);
}

/**
 * Keep, skip or refuse the entry `header`, given what came before it; `wanted` says which regular
 * files are kept (the model and its config, or a sidecar runtime's whole folder). Pure.
 */
export function entryDecision(header: EntryHeader, progress: ArchiveProgress, bounds: ArchiveBounds, wanted: (path: string) => boolean = isModelEntry): EntryDecision {
  if (progress.entries >= bounds.maxEntries) return { action: 'refuse', reason: `more than ${bounds.maxEntries} entries` };
  const p = entryPath(header.name);
  if ('reason' in p) return { action: 'refuse', reason: p.reason };
  const type = header.type ?? 'file';
  if (type === 'symlink' || type === 'link') return { action: 'refuse', reason: `entry "${header.name}" is a link; model archives hold regular files only` };
  if (type === 'directory') return { action: 'skip' };
  if (type !== 'file' && type !== 'contiguous-file') return { action: 'refuse', reason: `entry "${header.name}" is a ${type}; model archives hold regular files only` };
  const size = header.size ?? 0;
  if (progress.declaredBytes + size > bounds.maxUnpackedBytes) return { action: 'refuse', reason: `its entries hold more than the ${bounds.maxUnpackedBytes} bytes an archive may unpack to` };
  return p.path !== '' && wanted(p.path) ? { action: 'keep', path: p.path } : { action: 'skip' };
}

export type ModelChoice = { model: string; config: string | undefined } | { reason: string };

/**
 * The model among the archive's kept entries: `model.onnx` at the top, else its only `*.onnx`;
 * with the `config.json` beside it, if any. Pure.
 */
export function chooseModel(kept: readonly string[]): ModelChoice {
  const models = kept.filter((p) => p.endsWith('.onnx'));
  const model = models.includes(MODEL_FILE) ? MODEL_FILE : models.length === 1 ? models[0] : undefined;
  if (model === undefined) {
    return { reason: models.length === 0 ? `no ONNX model in it (${MODEL_FILE}, or a single *.onnx)` : `${models.length} .onnx files and no ${MODEL_FILE} at its top: which is the model?` };
  }
  const slash = model.lastIndexOf('/');
  const config = `${model.slice(0, slash + 1)}${MODEL_CONFIG_FILE}`;
  return { model, config: kept.includes(config) ? config : undefined };
}
