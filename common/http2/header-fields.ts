import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';

/** Headers node:http2 keeps the first value of (lib/internal/http2/util.js kSingleValueHeaders), so a call's headers read alike over either framing. */
const SINGLE_VALUE = new Set([
  ':status',
  ':method',
  ':authority',
  ':scheme',
  ':path',
  ':protocol',
  'access-control-allow-credentials',
  'access-control-max-age',
  'access-control-request-method',
  'age',
  'authorization',
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-md5',
  'content-range',
  'content-type',
  'date',
  'dnt',
  'etag',
  'expires',
  'from',
  'host',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'range',
  'referer',
  'retry-after',
  'tk',
  'upgrade-insecure-requests',
  'user-agent',
  'x-content-type-options',
]);

/**
 * The prototype of request header objects: one that has no names of its own or inherited, so no
 * header name reads as an inherited property. Object.create(null) would do as much, but makes a
 * dictionary-mode object, whose every read and for…in the router pays per call (its profile).
 */
const NO_INHERITED_NAMES: object = Object.create(null) as object;

/** Request pseudo-headers a server takes (RFC 9113 §8.3.1). */
const REQUEST_PSEUDO = new Set([':method', ':scheme', ':authority', ':path']);
/** Connection-specific fields HTTP/2 forbids (RFC 9113 §8.2.2). */
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);
/** A field name: lowercase token characters only (RFC 9110 §5.6.2, RFC 9113 §8.2.1). */
const NAME = /^[a-z0-9!#$%&'*+\-.^_`|~]+$/;
const UPPER = /[A-Z]/;
/** A field value: no NUL, CR or LF, no leading or trailing blank (RFC 9113 §8.2.1). */
const BAD_VALUE = /[\0\r\n]|^[ \t]|[ \t]$/;
/** regularField's verdicts other than a malformed field's reason. */
const KEPT: unique symbol = Symbol('kept');
const LEFT_OUT: unique symbol = Symbol('left out');

/**
 * A request's fields checked as nghttp2 checks them (nghttp2_http_on_header): the reason it is
 * malformed (a stream error PROTOCOL_ERROR), or the headers as node:http2 builds them. As
 * nghttp2 does, a regular field of a malformed name or value is left out, not an error, unless
 * the name has upper case.
 */
export function requestHeaders(fields: readonly string[]): IncomingHttpHeaders | string {
  const out = Object.create(NO_INHERITED_NAMES) as Record<string, string | string[]>;
  let regular = false;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i] as string;
    const value = fields[i + 1] as string;
    if (name.startsWith(':')) {
      if (regular) return `pseudo-header ${name} after a regular field`;
      if (!REQUEST_PSEUDO.has(name)) return `unknown pseudo-header ${name}`;
      if (out[name] !== undefined) return `pseudo-header ${name} repeated`;
      if (BAD_VALUE.test(value)) return `pseudo-header ${name} has a malformed value`;
    } else {
      regular = true;
      const verdict = regularField(name, value);
      if (verdict === LEFT_OUT) continue;
      if (verdict !== KEPT) return verdict;
      // nghttp2 takes one, whatever the values: two could be read two ways by two hops.
      if (name === 'content-length' && out[name] !== undefined) return 'content-length repeated';
    }
    add(out, name, value);
  }
  if (out[':method'] === undefined || out[':scheme'] === undefined || out[':path'] === undefined || out[':path'] === '') return 'a request without :method, :scheme or :path';
  if (out[':authority'] === undefined && out['host'] === undefined) return 'a request without :authority or host';
  const length = out['content-length'];
  if (length !== undefined && !/^[0-9]+$/.test(String(length))) return 'a malformed content-length';
  return out;
}

/** A request's trailers checked as nghttp2 checks them: the reason they make it malformed (RFC 9113 §8.1), or undefined. */
export function trailersError(fields: readonly string[]): string | undefined {
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i] as string;
    if (name.startsWith(':')) return `pseudo-header ${name} in trailers`;
    const verdict = regularField(name, fields[i + 1] as string);
    if (verdict !== KEPT && verdict !== LEFT_OUT) return verdict;
  }
  return undefined;
}

/**
 * A regular field, each test run once: KEPT, LEFT_OUT (a malformed name or value, as nghttp2
 * drops it), or the reason it makes the request malformed: upper case (RFC 9113 §8.2.1), a
 * connection-specific field (§8.2.2).
 */
function regularField(name: string, value: string): string | typeof KEPT | typeof LEFT_OUT {
  if (!NAME.test(name)) return UPPER.test(name) ? `field name ${name} has upper-case letters` : LEFT_OUT;
  if (BAD_VALUE.test(value)) return LEFT_OUT;
  if (CONNECTION_SPECIFIC.has(name) || (name === 'te' && value !== 'trailers')) return `connection-specific field ${name}`;
  return KEPT;
}

function add(out: Record<string, string | string[]>, name: string, value: string): void {
  const had = out[name];
  if (had === undefined) out[name] = name === 'set-cookie' ? [value] : value;
  else if (SINGLE_VALUE.has(name)) return;
  else if (Array.isArray(had)) had.push(value);
  else out[name] = `${had}${name === 'cookie' ? '; ' : ', '}${value}`;
}

/** Response headers as a flat list of names and values, pseudo-headers first (RFC 9113 §8.3). */
export function responseFields(headers: OutgoingHttpHeaders): string[] {
  // Two passes over the keys into one list: no key array, no second list joined (ADR 0055, "Shaving the call path").
  const out: string[] = [];
  for (const name in headers) if (name.startsWith(':')) pushField(out, name, headers[name]);
  for (const name in headers) if (!name.startsWith(':')) pushField(out, name, headers[name]);
  return out;
}

function pushField(out: string[], name: string, value: OutgoingHttpHeaders[string]): void {
  if (value === undefined) return;
  const key = name.toLowerCase();
  if (Array.isArray(value)) for (const v of value) out.push(key, v);
  else out.push(key, String(value));
}

/** A flat list of names and values as a header object (node:http2's streams take no other): the values of a name given twice in an array. */
export function headersOf(fields: readonly string[]): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const key = fields[i] as string;
    const value = fields[i + 1] as string;
    const had = out[key];
    if (had === undefined) out[key] = value;
    else if (Array.isArray(had)) had.push(value);
    else out[key] = [String(had), value];
  }
  return out;
}
