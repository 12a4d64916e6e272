import { parseRequest, type HeaderBag, type RequestTarget } from '../../common/request-grammar.js';

export { MODEL_HEADERS, type RequestForm } from '../../common/request-grammar.js';

/**
 * The form and model id of a request at the router, by the grammar the replica serves by
 * (common/request-grammar.ts). Ids are validated here, at the edge, before they reach a
 * replica; a path the grammar lacks is answered 404 here rather than sent to a replica.
 *
 * `rest` is the path below the route prefix, without the query string ('' or '/…'); the route
 * prefix alone (`POST /wine`) is its root, as the replica gets it.
 */
export function parseRequestForm(method: string, rest: string, headers: HeaderBag): RequestTarget {
  // A load is placed as a request for the model would be; the index and an unload concern
  // every replica and are answered before this, by repository-fanout.ts.
  return parseRequest(method, rest === '' ? '/' : rest, headers);
}
