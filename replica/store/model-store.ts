import { isArchiveId, type ModelId } from '../../common/model-id.js';
import { splitModelId } from '../../common/model-version.js';

/**
 * Where a load got its file: a fresh download (or, from a file:// store, the store's own file),
 * the disk cache after the store confirmed the version, a neighbour replica's download
 * (PeerFiles), or a disk copy while the store could not be asked (served rather than failing).
 */
export type FetchSource = 'store' | 'disk' | 'peer' | 'disk_unverified';

/** A model file on local disk, ready for onnxruntime, which reads it whole at session creation. */
export interface LocalModelFile {
  path: string;
  bytes: number;
  /** Where the file came from; absent means the store itself. */
  source?: FetchSource;
  /**
   * The replica wrote the file and nothing rewrites it in place (it is only ever deleted), so it
   * may be mapped into memory: a mapped file truncated under the process would crash it with
   * SIGBUS. Not so for a folder of the user's (file:// stores).
   */
  private?: boolean;
  /**
   * Called once the load that fetched the file is over: onnxruntime has read it into a session
   * (`ok`) or refused it. A refused file is dropped from any local cache, so a broken model is
   * never served again without a new download. Absent when the file is the store's own.
   */
  settle?: (ok: boolean) => void;
  /** Which version of the model the file holds, as the store's `version()` names it; absent when it cannot tell. */
  version?: ModelVersion;
  /** The bytes of the model's config.json (replica/store/model-config.ts), fetched with it; absent when it has none. */
  config?: Uint8Array;
}

/** A version tag of a model in its store (an ETag), and when the store last confirmed it (injected clock). */
export interface ModelVersion {
  tag: string;
  checkedAt: number;
}

/**
 * Where models live: `<root>/<ID>/model.onnx`, version V of it (the model `ID@V`) at
 * `<root>/<ID>/<V>/model.onnx` (modelFolder). `fetch` throws ModelmuxError `model_not_found`,
 * `store_unavailable` or `model_too_large`; ids are validated before they get here.
 */
export interface ModelStore {
  /** For logs: the source URI, never credentials. */
  readonly uri: string;
  /** `fresh`: ask the store now rather than reuse a local copy it confirmed a moment ago. */
  fetch(id: ModelId, fresh?: boolean): Promise<LocalModelFile>;
  /**
   * The versions of model `base` (an id without a version) in the store now: the names of its
   * numeric version folders, at most MAX_LISTED_VERSIONS of them, in no particular order.
   * Throws ModelmuxError `store_unavailable`. Absent when the store cannot list.
   */
  listVersions?(base: ModelId): Promise<string[]>;
}

/** Versions a listing reports at most: one page of an S3 listing. */
export const MAX_LISTED_VERSIONS = 1000;

/** A store that can name the version of a model it holds now, so loaded models can be revalidated. */
export interface VersionedStore extends ModelStore {
  /** The tag `fetch` would give the file now; throws ModelmuxError `model_not_found` or `store_unavailable`. */
  version(id: ModelId): Promise<string>;
}

export const MODEL_FILE = 'model.onnx';

/** The folder of model `id` below the store's root, without slashes at either end: `wine-7`, or `wine-7/2` for `wine-7@2`. */
export function modelFolder(id: ModelId): string {
  const { base, version } = splitModelId(id);
  return version === undefined ? base : `${base}/${version}`;
}

/** Joins the store's prefix and the id into the key of the model's folder, without a trailing slash. */
export function folderKey(prefix: string, id: ModelId): string {
  const p = prefix.replace(/^\/+|\/+$/g, '');
  return p === '' ? modelFolder(id) : `${p}/${modelFolder(id)}`;
}

/** Joins the store's prefix and the id into the object key or relative path: the model file's, or the archive's own. */
export function modelKey(prefix: string, id: ModelId): string {
  return isArchiveId(id) ? folderKey(prefix, id) : `${folderKey(prefix, id)}/${MODEL_FILE}`;
}
