import { ModelmuxError } from './errors.js';
import { parseModelId, type ModelId } from './model-id.js';
import { isModelVersion, joinModelId, VERSION_SEPARATOR } from './model-version.js';
import { HEADER_RAY_MODEL_ID, HEADER_RAY_MODEL_ID_HYPHEN, HEADER_SAGEMAKER_MODEL } from './names.js';

/**
 * The one request grammar of the data plane: which requests exist, which form each is, and
 * where its model id comes from. The router places a request by it and the replica serves by
 * it, so the two cannot disagree on the model (a request the router placed for model A must
 * not run model B on the replica) or on whether a path exists.
 *
 * Paths are matched exactly as the Open Inference Protocol writes them: case-sensitive, no
 * empty segment, no trailing slash. `/V2/MODELS/x/INFER`, `/invocations/` or `//` are not
 * requests of the grammar and get 404 `not_found` from both sides; nothing is canonicalised,
 * because a rewritten path is where a proxy and its backend start to disagree, and model ids
 * are case-sensitive.
 *
 * | method     | path (below the route prefix)                 | form      | model id from |
 * |------------|-----------------------------------------------|-----------|---------------|
 * | POST       | /v2/models/{id}[/versions/{v}]/infer           | v2        | the path      |
 * | GET, HEAD  | /v2/models/{id}[/versions/{v}][/ready]         | v2        | the path      |
 * | POST       | /                                             | ray       | RAY_MODEL_HEADERS |
 * | POST       | /invocations                                  | sagemaker | SAGEMAKER_MODEL_HEADERS |
 * | GET, HEAD  | /v2, /v2/health/live, /v2/health/ready, /models, /metrics | other | none |
 * | POST       | /v2/repository/models/{id}/load, …/unload      | v2        | the path      |
 * | POST       | /v2/repository/index                          | other     | none          |
 *
 * The last two are the Open Inference Protocol's model repository extension.
 * `/versions/{v}` names the model `{id}@{v}` (common/model-version.ts), which the router places
 * and the replica serves as a model of its own; `{id}@{v}` may be written wherever an id is.
 * A request whose Connection header names a model header is refused (400
 * `model_header_in_connection`) whatever its path: a proxy on the way drops the headers
 * Connection names, so the model the client meant would not be the one served.
 */
export type RequestForm = 'v2' | 'ray' | 'sagemaker' | 'other';

/** The headers of the Ray Serve form, in the order they are read: Ray's own, then the spelling proxies that drop underscores let through. */
export const RAY_MODEL_HEADERS: readonly string[] = [HEADER_RAY_MODEL_ID, HEADER_RAY_MODEL_ID_HYPHEN];
export const SAGEMAKER_MODEL_HEADERS: readonly string[] = [HEADER_SAGEMAKER_MODEL];
/** Every header that carries a model id in some form. */
export const MODEL_HEADERS: readonly string[] = [...RAY_MODEL_HEADERS, ...SAGEMAKER_MODEL_HEADERS];

/**
 * Request headers by lowercase name, as node:http's `req.headers` holds them: a repeated field's
 * values joined with ", ". The grammar reads `connection` and the model headers.
 */
export type HeaderBag = Readonly<Record<string, string | readonly string[] | undefined>>;

/** A request of the grammar, before its model id is read. */
export interface RequestMatch {
  form: RequestForm;
  /** The model id segment of a V2 path, still percent-encoded. */
  pathId?: string;
  /** The version segment of a V2 `/versions/{v}` path, still percent-encoded. */
  pathVersion?: string;
  /** A request of the model repository extension, and which. */
  repository?: 'index' | 'load' | 'unload';
}

export interface RequestTarget {
  form: RequestForm;
  model: ModelId | undefined;
  repository?: RequestMatch['repository'];
}

const V2_MODELS = '/v2/models/';
const V2_REPOSITORY_MODELS = '/v2/repository/models/';

function isRead(method: string): boolean {
  return method === 'GET' || method === 'HEAD';
}

function v2Match(method: string, rest: string): RequestMatch | undefined {
  const parts = rest.split('/');
  const [id, a, b, c] = parts;
  if (id === undefined || id === '') return undefined;
  const ends = (last: string | undefined): boolean => (isRead(method) && (last === undefined || last === 'ready')) || (method === 'POST' && last === 'infer');
  if (parts.length <= 2 && ends(a)) return { form: 'v2', pathId: id };
  if (parts.length >= 3 && parts.length <= 4 && a === 'versions' && b !== undefined && b !== '' && ends(c)) return { form: 'v2', pathId: id, pathVersion: b };
  return undefined;
}

/**
 * The request `method` and `path` (below any route prefix, without the query string) make in
 * the grammar, or undefined when there is no such request (404 `not_found`).
 */
export function matchRequest(method: string, path: string): RequestMatch | undefined {
  if (path.startsWith(V2_MODELS)) return v2Match(method, path.slice(V2_MODELS.length));
  if (path.startsWith(V2_REPOSITORY_MODELS)) {
    const [id, action, ...more] = path.slice(V2_REPOSITORY_MODELS.length).split('/');
    if (method !== 'POST' || id === undefined || id === '' || more.length > 0 || (action !== 'load' && action !== 'unload')) return undefined;
    return { form: 'v2', pathId: id, repository: action };
  }
  switch (path) {
    case '/v2/repository/index':
      return method === 'POST' ? { form: 'other', repository: 'index' } : undefined;
    case '/':
      return method === 'POST' ? { form: 'ray' } : undefined;
    case '/invocations':
      return method === 'POST' ? { form: 'sagemaker' } : undefined;
    case '/v2':
    case '/v2/health/live':
    case '/v2/health/ready':
    case '/models':
    case '/metrics':
      return isRead(method) ? { form: 'other' } : undefined;
    default:
      return undefined;
  }
}

function headerValue(headers: HeaderBag, name: string): string | undefined {
  const v = headers[name];
  return typeof v === 'string' || v === undefined ? v : v.join(', ');
}

/** The model header the Connection header names, if any. */
export function modelHeaderInConnection(headers: HeaderBag): string | undefined {
  const connection = headerValue(headers, 'connection');
  // What nearly every client sends names no other header.
  if (connection === undefined || connection === 'keep-alive' || connection === 'close') return undefined;
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (MODEL_HEADERS.includes(name)) return name;
  }
  return undefined;
}

function validated(raw: string): ModelId {
  const check = parseModelId(raw);
  if (!check.ok) throw new ModelmuxError('invalid_model_id', check.reason);
  return check.id;
}

function decodedSegment(segment: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ModelmuxError('invalid_model_id', 'the model id in the path is not valid percent-encoding');
  }
}

/** The model of a V2 path: `{id}`, or `{id}@{v}` for `/versions/{v}`. */
function pathModel(segment: string, versionSegment: string | undefined): ModelId {
  // The version is digits only: never percent-encoded, so never decoded.
  return versionedModel(decodedSegment(segment), versionSegment);
}

/** `id`, or `id@version` (a V2 path's `/versions/{v}`, a gRPC request's `model_version`); throws invalid_model_id. */
export function versionedModel(id: string, version: string | undefined): ModelId {
  if (version === undefined) return validated(id);
  if (!isModelVersion(version)) throw new ModelmuxError('invalid_model_id', `a model version is 1 to 18 digits, not "${version}"`);
  if (id.includes(VERSION_SEPARATOR)) throw new ModelmuxError('invalid_model_id', `the request names a version twice: "${id}" and version ${version}`);
  return validated(joinModelId(id, version));
}

/** One model id from the first of `names` given; any other of them given must agree with it. */
function headerModel(headers: HeaderBag, names: readonly string[], missing: string): ModelId {
  let raw: string | undefined;
  let from = '';
  for (const name of names) {
    const v = headerValue(headers, name);
    if (v === undefined) continue;
    if (raw === undefined) {
      raw = v;
      from = name;
    } else if (v !== raw) throw new ModelmuxError('invalid_model_id', `the ${from} and ${name} headers name different models`);
  }
  if (raw === undefined) throw new ModelmuxError('missing_model_id', missing);
  // node:http joins a repeated field with ", "; a comma is never part of an id.
  if (raw.includes(',')) throw new ModelmuxError('invalid_model_id', `the ${from} header is given more than once`);
  return validated(raw);
}

/** The model id of a matched request (undefined for the `other` form); throws the 400 codes. */
export function requestModel(match: RequestMatch, headers: HeaderBag): ModelId | undefined {
  const named = modelHeaderInConnection(headers);
  if (named !== undefined) throw new ModelmuxError('model_header_in_connection', `the Connection header names ${named}, which carries the model id; send it as an ordinary header`);
  switch (match.form) {
    case 'v2':
      return pathModel(match.pathId ?? '', match.pathVersion);
    case 'ray':
      return headerModel(headers, RAY_MODEL_HEADERS, `POST / needs the ${HEADER_RAY_MODEL_ID} (or ${HEADER_RAY_MODEL_ID_HYPHEN}) header`);
    case 'sagemaker':
      return headerModel(headers, SAGEMAKER_MODEL_HEADERS, 'POST /invocations needs the X-Amzn-SageMaker-Target-Model header');
    case 'other':
      return undefined;
  }
}

/** The answer to a request `matchRequest` does not know. */
export function requestNotFound(method: string, path: string): ModelmuxError {
  return new ModelmuxError('not_found', `no ${method} ${path}: paths are case-sensitive, without a trailing slash (see the request forms)`);
}

/** `matchRequest` then `requestModel`; a request outside the grammar throws 404 `not_found`. */
export function parseRequest(method: string, path: string, headers: HeaderBag): RequestTarget {
  const match = matchRequest(method, path);
  if (match === undefined) throw requestNotFound(method, path);
  return { form: match.form, model: requestModel(match, headers), ...(match.repository !== undefined ? { repository: match.repository } : {}) };
}
