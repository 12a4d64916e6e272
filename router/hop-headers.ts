import type { IncomingHttpHeaders } from 'node:http';

/** RFC 9110 §7.6.1 connection-specific headers, never forwarded by a proxy. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/**
 * A copy of `headers` without hop-by-hop headers, those the Connection header names, and
 * `drop` (e.g. host, content-length that the proxy sets itself).
 */
export function endToEndHeaders(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>, drop: readonly string[] = []): Record<string, string | string[]> {
  const named = new Set<string>(drop);
  const conn = headers['connection'];
  for (const v of Array.isArray(conn) ? conn : conn ? [conn] : []) for (const t of v.split(',')) named.add(t.trim().toLowerCase());
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    const key = k.toLowerCase();
    if (v === undefined || HOP_BY_HOP.has(key) || named.has(key)) continue;
    out[key] = v;
  }
  return out;
}
