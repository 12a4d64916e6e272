import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/**
 * The router's internal form of a unary gRPC call over HTTP/1.1 to a replica (ADR 0054): the
 * replica's HTTP port takes `POST /inference.GRPCInferenceService/<Method>` with
 * `content-type: application/grpc` and the length-prefixed message as its body, and answers it
 * whole, as a unary answer is complete before it is sent: HTTP 200, the gRPC status and message
 * and every metadata entry as response headers, the names of those that are trailers in
 * GRPC_TRAILER_NAMES_HEADER, and the length-prefixed answer message (or nothing) as a
 * Content-Length body. Clients never send it; the router does, to replicas that serve it. Pure.
 */

export const GRPC_SERVICE_PATH = '/inference.GRPCInferenceService/';

/** Which of an answer's response headers are its trailers (comma-separated); grpc-status and grpc-message always are. */
export const GRPC_TRAILER_NAMES_HEADER = 'x-modelmux-grpc-trailers';

/** A request of the form: a POST to the service's path with a gRPC content type. */
export function isGrpcHttp1Request(method: string | undefined, url: string | undefined, contentType: string | undefined): boolean {
  return method === 'POST' && url !== undefined && url.startsWith(GRPC_SERVICE_PATH) && contentType !== undefined && contentType.startsWith('application/grpc');
}

/** The answer's head: its metadata headers and its trailers side by side, the trailers named. */
export function http1AnswerHeaders(head: OutgoingHttpHeaders, trailers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const names = Object.keys(trailers);
  const out: OutgoingHttpHeaders = { ...head, ...trailers, 'content-type': 'application/grpc' };
  if (names.length > 0) out[GRPC_TRAILER_NAMES_HEADER] = names.join(',');
  return out;
}

/** Response headers of the HTTP/1.1 connection or of the form itself, neither headers nor trailers of the answer. */
const FORM_HEADERS: ReadonlySet<string> = new Set([GRPC_TRAILER_NAMES_HEADER, 'content-length', 'connection', 'keep-alive', 'date']);

/** Whether `name` is one of the comma-separated names of `list`. */
function listed(list: string, name: string): boolean {
  for (let at = list.indexOf(name); at !== -1; at = list.indexOf(name, at + 1)) {
    const end = at + name.length;
    if ((at === 0 || list.charCodeAt(at - 1) === 44) && (end === list.length || list.charCodeAt(end) === 44)) return true;
  }
  return false;
}

/**
 * An answer's response headers, a flat list of names and values as received, split back into the
 * headers and the trailers of a gRPC answer in one pass (no object of all of them built first,
 * no set of the trailers' names: both showed in the router's profile). grpc-status and
 * grpc-message are always trailers. A name received twice has its values in an array.
 */
export function splitHttp1Answer(raw: readonly string[]): { head: IncomingHttpHeaders; trailers: IncomingHttpHeaders } {
  let named = '';
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i] === GRPC_TRAILER_NAMES_HEADER) named = raw[i + 1] as string;
  const head: IncomingHttpHeaders = {};
  const trailers: IncomingHttpHeaders = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const key = raw[i] as string;
    if (FORM_HEADERS.has(key)) continue;
    const to = key === 'grpc-status' || key === 'grpc-message' || (named !== '' && listed(named, key)) ? trailers : head;
    const value = raw[i + 1] as string;
    const had = to[key];
    to[key] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  return { head, trailers };
}
