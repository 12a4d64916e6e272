import { idSegment } from '../../common/model-id.js';
import { MODEL_HEADERS } from '../../common/request-grammar.js';
import type { RequestForm } from '../../common/request-grammar.js';

/**
 * A routed request carries the backend's model id to the replica where the client wrote the
 * route's public name: in the V2 path, or in the model header of the Ray and SageMaker forms.
 * The replica reads the model by the same grammar (common/request-grammar.ts), so it serves
 * exactly the backend the router placed the request for.
 */

const V2_MODELS = '/v2/models/';

/**
 * `/v2/models/{public}[/versions/{v}][/infer|/ready]` with the id (and version: a backend names
 * its own, `id@v`) replaced by `backend`. Model id characters are all path characters (RFC
 * 3986 pchar) but an archive key's `/`, written `%2F` (idSegment), which the replica decodes.
 */
export function rewriteV2Path(rest: string, backend: string): string {
  const parts = rest.slice(V2_MODELS.length).split('/');
  const tail = parts[1] === 'versions' ? parts.slice(3) : parts.slice(1);
  return `${V2_MODELS}${idSegment(backend)}${tail.length === 0 ? '' : `/${tail.join('/')}`}`;
}

/** Headers (flat `[name, value, …]`, forwarded or raw) with every model header naming `backend`. */
export function rewriteModelHeaders(headers: string[], backend: string): void {
  for (let i = 0; i < headers.length; i += 2) if (MODEL_HEADERS.includes((headers[i] as string).toLowerCase())) headers[i + 1] = backend;
}

/** The path below the route prefix and the forwarded headers of a request to `backend` instead of the public name. */
export function rewriteForBackend(form: RequestForm, rest: string, headers: string[], backend: string): string {
  if (form === 'v2') return rewriteV2Path(rest, backend);
  rewriteModelHeaders(headers, backend);
  return rest;
}

/** The value of header `name` (lowercase) in node's rawHeaders (names as sent), the first one given. */
export function rawHeaderValue(rawHeaders: readonly string[], name: string): string | undefined {
  for (let i = 0; i < rawHeaders.length; i += 2) if ((rawHeaders[i] as string).toLowerCase() === name) return rawHeaders[i + 1];
  return undefined;
}
