import type { ErrorCode } from '../../common/errors.js';

/**
 * The headers an error answer carries besides its JSON, the same on every path the router answers
 * from: Retry-After where waiting helps (the pool busy or empty, the byte budget full, the
 * composite bounds of the router or of the client reached), and
 * Connection: close where the body was left unread (too large, no room for it, too slow), since
 * closing costs less than draining it; WWW-Authenticate where a credential is missing (RFC 9110 §11.6.1).
 */
export function errorHeaders(code: ErrorCode): string[] {
  const out: string[] = [];
  const composite = code === 'composite_saturated' || code === 'composite_client_limit';
  if (code === 'pool_saturated' || code === 'no_replicas' || code === 'buffer_full' || composite) out.push('retry-after', '1');
  // A composite refused for its bounds is refused before its body is read, or while it is.
  if (code === 'body_too_large' || code === 'buffer_full' || code === 'request_timeout' || composite) out.push('connection', 'close');
  if (code === 'repository_api_unauthorized') out.push('www-authenticate', 'Bearer realm="modelmux-repository"');
  return out;
}
