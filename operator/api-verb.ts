/**
 * The verbs of Kubernetes API requests, as the API server's authorizer names them, plus
 * discovery, and apply for a server-side apply (a patch to the authorizer; the API server's own
 * request metric calls it APPLY too), so that an apply is told from a status patch.
 */
export type ApiVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'apply' | 'delete' | 'discovery' | 'other';

const APPLY_PATCH = 'application/apply-patch+yaml';

/**
 * The verb of a request from its method and URL, so the operator can count its own API reads
 * by kind of read: `GET …/pods` is a list, `GET …/pods/x` a get, `?watch=true` a watch, and
 * `GET /apis/apps/v1` (what client-node's KubernetesObjectApi asks once per API version to map
 * a kind to its path) is discovery; a PATCH whose `contentType` is the apply patch's is an apply.
 */
export function apiVerb(method: string, url: URL, contentType?: string): ApiVerb {
  const parts = url.pathname.split('/').filter((p) => p !== '');
  // /api/<version>/… and /apis/<group>/<version>/…: what follows names the resource.
  const rest = parts[0] === 'api' ? parts.slice(2) : parts[0] === 'apis' ? parts.slice(3) : [];
  if (rest.length === 0) return method.toUpperCase() === 'GET' ? 'discovery' : 'other';
  const inNamespace = rest[0] === 'namespaces' && rest.length > 2 ? rest.slice(2) : rest;
  const named = inNamespace.length >= 2;
  switch (method.toUpperCase()) {
    case 'GET':
      if (url.searchParams.get('watch') === 'true') return 'watch';
      return named ? 'get' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return contentType?.split(';')[0]?.trim() === APPLY_PATCH ? 'apply' : 'patch';
    case 'DELETE':
      return 'delete';
    default:
      return 'other';
  }
}
