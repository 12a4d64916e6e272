import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { status } from '@grpc/grpc-js';
import { ERROR_CATALOGUE, type ErrorCode } from '../../common/errors.js';
import { ERROR_CODE_TRAILER } from '../../common/grpc/inference-service.js';
import { TRANSPORT_HEADERS } from '../../common/grpc/unary-call.js';
import { HEADER_BACKEND, HEADER_REQUEST_ID } from '../../common/names.js';
import { fieldValue } from '../http1/http1-syntax.js';

/**
 * The headers of a forwarded gRPC call, as HTTP/2 header objects (node:http2's own) or the
 * upstream pool's flat list, and of its answer, as flat lists of names and values (Fields), as
 * header blocks are written: the router passes metadata on without building grpc-js Metadata
 * (ADR 0049), and an answer's fields without header objects (ADR 0055). Pure.
 */

/** Request headers of HTTP/2 and of gRPC's transport, and the ones the router writes anew: never passed on. */
const NOT_FORWARDED: ReadonlySet<string> = new Set([...TRANSPORT_HEADERS, 'user-agent', HEADER_REQUEST_ID, 'x-forwarded-for']);

/** Response headers of the replica's connection, not of its answer: the router's server writes its own. */
const NOT_ANSWERED: ReadonlySet<string> = new Set(['content-type', 'date', 'grpc-encoding', 'grpc-accept-encoding', 'grpc-status', 'grpc-message', 'content-length']);

/** Trailers of the replica's connection, not of its answer. */
const NOT_PASSED: ReadonlySet<string> = new Set(['content-type', 'date']);

/** The largest value grpc-timeout's 8 digits hold in milliseconds. */
const MAX_TIMEOUT_MS = 99_999_999;

/** What every try of a call sends: the method's path, the call's metadata, the router's request id and the client's address appended to x-forwarded-for. */
export function forwardedHeaders(incoming: IncomingHttpHeaders, path: string, requestId: string, client: string): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {
    ':method': 'POST',
    ':path': path,
    ':scheme': 'http',
    'content-type': 'application/grpc',
    te: 'trailers',
  };
  // for…in over header objects, which have no inherited keys: Object.entries' pair arrays showed in the router's profile.
  for (const key in incoming) {
    const value = incoming[key];
    if (value !== undefined && !key.startsWith(':') && !NOT_FORWARDED.has(key)) out[key] = value;
  }
  out[HEADER_REQUEST_ID] = requestId;
  out['x-forwarded-for'] = forwardedFor(incoming, client);
  return out;
}

/**
 * The same headers as the upstream pool's flat list of names and values, for tries of the
 * HTTP/1.1 form (no pseudo-headers, no `te`): built straight from the call's, without the header
 * objects of forwardedHeaders and tryHeaders between (ADR 0055, "Shaving the call path").
 */
export function forwardedFields(incoming: IncomingHttpHeaders, requestId: string, client: string): string[] {
  const out = ['content-type', 'application/grpc'];
  for (const key in incoming) {
    const value = incoming[key];
    if (value === undefined || key.startsWith(':') || NOT_FORWARDED.has(key)) continue;
    if (Array.isArray(value)) for (const v of value) out.push(key, v);
    else out.push(key, value);
  }
  out.push(HEADER_REQUEST_ID, requestId, 'x-forwarded-for', forwardedFor(incoming, client));
  return out;
}

/** The client's address appended to the call's x-forwarded-for. */
function forwardedFor(incoming: IncomingHttpHeaders, client: string): string {
  const given = incoming['x-forwarded-for'];
  return typeof given === 'string' ? `${given}, ${client}` : client;
}

/** grpc-timeout's value for what is left of a call's deadline. */
export function grpcTimeout(remainingMs: number): string {
  return `${Math.min(MAX_TIMEOUT_MS, Math.max(1, Math.ceil(remainingMs)))}m`;
}

/** One try's headers: the call's, to `authority`, with what is left of its deadline. */
export function tryHeaders(base: OutgoingHttpHeaders, authority: string, remainingMs: number): OutgoingHttpHeaders {
  return { ...base, ':authority': authority, 'grpc-timeout': grpcTimeout(remainingMs) };
}

/** Header fields as a flat list of names and values, names lower-case: [name, value, name, value, …]. */
export type Fields = string[];

/** The answer's response headers the client gets: the replica's metadata, the request id and a split's backend, these two the router's own. */
export function answerFields(head: readonly string[], requestId: string, backend: string | undefined): Fields {
  const out: Fields = [];
  for (let i = 0; i + 1 < head.length; i += 2) {
    const key = head[i] as string;
    if (key.startsWith(':') || NOT_ANSWERED.has(key) || key === HEADER_REQUEST_ID || (backend !== undefined && key === HEADER_BACKEND)) continue;
    out.push(key, head[i + 1] as string);
  }
  out.push(HEADER_REQUEST_ID, requestId);
  if (backend !== undefined) out.push(HEADER_BACKEND, backend);
  return out;
}

/** The replica's trailers as the client gets them: all but HTTP/2's pseudo-headers and the transport's. */
export function passedFields(trailers: readonly string[]): Fields {
  const out: Fields = [];
  for (let i = 0; i + 1 < trailers.length; i += 2) {
    const key = trailers[i] as string;
    if (!key.startsWith(':') && !NOT_PASSED.has(key)) out.push(key, trailers[i + 1] as string);
  }
  return out;
}

/** A catalogue code read from a trailer, when it is one. */
function catalogueCode(value: string | undefined): ErrorCode | undefined {
  return value !== undefined && Object.hasOwn(ERROR_CATALOGUE, value) ? (value as ErrorCode) : undefined;
}

/** The gRPC status of a replica's answer, its message, and the catalogue code of its trailers. */
export interface UpstreamStatus {
  code: status;
  details: string;
  errorCode: ErrorCode | undefined;
}

/** A replica's status, read from its trailers (or trailers-only headers). */
export function statusOf(trailers: readonly string[]): UpstreamStatus {
  const code = Number(fieldValue(trailers, 'grpc-status'));
  const message = fieldValue(trailers, 'grpc-message') ?? '';
  let details = message;
  try {
    details = decodeURIComponent(message);
  } catch {
    // Not percent-encoded as gRPC asks: shown as it came.
  }
  return { code: Number.isInteger(code) && code >= 0 ? code : status.UNKNOWN, details, errorCode: catalogueCode(fieldValue(trailers, ERROR_CODE_TRAILER)) };
}

/** The replica's error code of a failed try, and whether nothing listened there (outlier detection ejects at once). */
export function upstreamError(trailers: readonly string[], details: string): { code: ErrorCode | undefined; refused: boolean } {
  const code = catalogueCode(fieldValue(trailers, ERROR_CODE_TRAILER));
  return { code, refused: code === undefined && /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH/.test(details) };
}
