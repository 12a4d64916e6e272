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

/** An answer's response headers split back into the headers and the trailers of a gRPC answer. */
export function splitHttp1Answer(headers: IncomingHttpHeaders): { head: IncomingHttpHeaders; trailers: IncomingHttpHeaders } {
  const named = headers[GRPC_TRAILER_NAMES_HEADER];
  const trailerNames = new Set(typeof named === 'string' ? named.split(',') : []);
  trailerNames.add('grpc-status');
  trailerNames.add('grpc-message');
  const head: IncomingHttpHeaders = {};
  const trailers: IncomingHttpHeaders = {};
  for (const [key, value] of Object.entries(headers)) {
    if (key === GRPC_TRAILER_NAMES_HEADER || key === 'content-length' || key === 'connection' || key === 'keep-alive' || key === 'date') continue;
    if (trailerNames.has(key)) trailers[key] = value;
    else head[key] = value;
  }
  return { head, trailers };
}
