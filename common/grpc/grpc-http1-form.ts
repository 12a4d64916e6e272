import type { OutgoingHttpHeaders } from 'node:http';

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

/**
 * Response headers of the HTTP/1.1 connection or of the form itself, neither headers nor trailers
 * of the answer. Compared, not looked up in a set: each name read is a new string, which a set
 * lookup hashes first (the router's profile).
 */
function formHeader(name: string): boolean {
  switch (name) {
    case GRPC_TRAILER_NAMES_HEADER:
    case 'content-length':
    case 'connection':
    case 'keep-alive':
    case 'date':
      return true;
    default:
      return false;
  }
}

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
 * headers and the trailers of a gRPC answer in one pass, each a flat list of names and values
 * as HTTP/2 header blocks are written (no header objects, no set of the trailers' names: both
 * showed in the router's profile). grpc-status and grpc-message are always trailers. A name
 * received twice stays two fields.
 */
export function splitHttp1Answer(raw: readonly string[]): { head: string[]; trailers: string[] } {
  let named = '';
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i] === GRPC_TRAILER_NAMES_HEADER) named = raw[i + 1] as string;
  const head: string[] = [];
  const trailers: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const key = raw[i] as string;
    if (formHeader(key)) continue;
    const to = key === 'grpc-status' || key === 'grpc-message' || (named !== '' && listed(named, key)) ? trailers : head;
    to.push(key, raw[i + 1] as string);
  }
  return { head, trailers };
}
