import { fieldTokens } from './http1-syntax.js';

/**
 * RFC 9110 §7.6.1 connection-specific headers, never forwarded by a proxy. A switch, not a set:
 * every field name of every request and response is tested, and a set first hashes the whole
 * name (a new string each time), where the switch mostly compares lengths.
 */
function isHopByHop(name: string): boolean {
  switch (name) {
    case 'connection':
    case 'keep-alive':
    case 'proxy-authenticate':
    case 'proxy-authorization':
    case 'proxy-connection':
    case 'te':
    case 'trailer':
    case 'transfer-encoding':
    case 'upgrade':
      return true;
    default:
      return false;
  }
}

/** Adds the header names a Connection header value lists (lowercased) to `into`. */
function addConnectionTokens(value: string, into: Set<string>): void {
  for (const name of fieldTokens(value)) if (name !== 'close' && !isHopByHop(name)) into.add(name);
}

/**
 * `fields` (flat `[name, value, …]`, names lowercased) without hop-by-hop headers, those the
 * Connection header names, and `setByProxy` (a field the proxy writes itself). Runs once per
 * response on the hot path: no set is built unless Connection names something.
 */
export function endToEndFields(fields: readonly string[], setByProxy: string): string[] {
  let named: Set<string> | undefined;
  for (let i = 0; i < fields.length; i += 2) {
    const value = fields[i + 1] as string;
    // `keep-alive` and `close`, what nearly everyone sends, name no other header.
    if (fields[i] === 'connection' && value !== 'keep-alive' && value !== 'close') addConnectionTokens(value, (named ??= new Set()));
  }
  const out: string[] = [];
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i] as string;
    if (name === setByProxy || isHopByHop(name) || (named !== undefined && named.has(name))) continue;
    out.push(name, fields[i + 1] as string);
  }
  return out;
}

/** What one pass over a request's raw headers found. */
export interface ScannedRequestHeaders {
  /**
   * End-to-end headers as a flat `[name, value, …]` list for the upstream pool, names lowercased, without
   * hop-by-hop headers, those Connection names, and the ones the proxy sets itself (host,
   * content-length, x-request-id, x-forwarded-for) or has already answered (expect).
   */
  forward: string[];
  requestId: string | undefined;
  /** The client's own x-forwarded-for values, joined. */
  forwardedFor: string | undefined;
  contentLength: string | undefined;
  /**
   * Only the headers the request grammar reads (common/request-grammar.ts): the model headers
   * asked for and Connection, a repeated one's values joined with ", " as node:http joins them,
   * so that the router and the replica read the same value.
   */
  modelHeaders: Record<string, string>;
}

/** Headers dropped from the forwarded list that the proxy reads or sets itself (a switch, as isHopByHop). */
function isSetByProxy(name: string): boolean {
  switch (name) {
    case 'host':
    case 'content-length':
    case 'x-request-id':
    case 'x-forwarded-for':
    case 'expect':
      return true;
    default:
      return false;
  }
}

function joinInto(bag: Record<string, string>, name: string, value: string): void {
  const before = bag[name];
  bag[name] = before === undefined ? value : `${before}, ${value}`;
}

/**
 * One pass over `req.rawHeaders` (so Node never builds `req.headers`): the forwarded list and
 * the few values the proxy reads. `modelHeaderNames` are kept in `modelHeaders` and forwarded.
 */
export function scanRequestHeaders(raw: readonly string[], modelHeaderNames: readonly string[]): ScannedRequestHeaders {
  const forward: string[] = [];
  const modelHeaders: Record<string, string> = {};
  let requestId: string | undefined;
  let forwardedFor: string | undefined;
  let contentLength: string | undefined;
  let named: Set<string> | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    const value = raw[i + 1] as string;
    if (isHopByHop(name)) {
      if (name === 'connection') {
        joinInto(modelHeaders, 'connection', value);
        if (value !== 'keep-alive' && value !== 'close') addConnectionTokens(value, (named ??= new Set()));
      }
      continue;
    }
    if (isSetByProxy(name)) {
      if (name === 'x-request-id') requestId ??= value;
      else if (name === 'x-forwarded-for') forwardedFor = forwardedFor === undefined ? value : `${forwardedFor}, ${value}`;
      else if (name === 'content-length') contentLength ??= value;
      continue;
    }
    const model = modelHeaderNames.indexOf(name);
    // Keyed by the list's own name: a key sliced from the request is looked up in V8's string table first.
    if (model !== -1) joinInto(modelHeaders, modelHeaderNames[model] as string, value);
    forward.push(name, value);
  }
  if (named !== undefined && named.size > 0) {
    const kept: string[] = [];
    for (let i = 0; i < forward.length; i += 2) if (!named.has(forward[i] as string)) kept.push(forward[i] as string, forward[i + 1] as string);
    return { forward: kept, requestId, forwardedFor, contentLength, modelHeaders };
  }
  return { forward, requestId, forwardedFor, contentLength, modelHeaders };
}
