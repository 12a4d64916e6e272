import { status } from '@grpc/grpc-js';
import { ERROR_CATALOGUE, refusedBeforeWork, type ErrorCode, type ModelmuxError } from '../errors.js';
import { HEADER_OVERLOADED } from '../names.js';
import { ERROR_CODE_TRAILER } from './inference-service.js';

/**
 * The gRPC status of a catalogue code (docs/errors.md, "gRPC status codes"). The gRPC form answers
 * the same codes as the HTTP form; the status follows the code's HTTP status, and says what a gRPC
 * client's retry logic needs (UNAVAILABLE: try again or elsewhere; RESOURCE_EXHAUSTED: a bound
 * was hit, back off); the code itself rides in the x-modelmux-error-code trailer.
 */
export const GRPC_STATUS_BY_HTTP: Readonly<Record<number, status>> = {
  400: status.INVALID_ARGUMENT,
  401: status.UNAUTHENTICATED,
  403: status.PERMISSION_DENIED,
  404: status.NOT_FOUND,
  408: status.DEADLINE_EXCEEDED,
  413: status.RESOURCE_EXHAUSTED,
  415: status.INVALID_ARGUMENT,
  // The model cannot be served as it is: the same call cannot succeed later.
  422: status.FAILED_PRECONDITION,
  429: status.RESOURCE_EXHAUSTED,
  431: status.RESOURCE_EXHAUSTED,
  // nginx's "client closed request": never sent, only logged and counted.
  499: status.CANCELLED,
  500: status.INTERNAL,
  501: status.UNIMPLEMENTED,
  502: status.UNAVAILABLE,
  503: status.UNAVAILABLE,
  504: status.DEADLINE_EXCEEDED,
  507: status.RESOURCE_EXHAUSTED,
  508: status.FAILED_PRECONDITION,
};

/**
 * Codes whose HTTP status says less than gRPC can. 503s that are a bound of the router's, not a
 * replica that is away: back off, as for a 429. 502s of composite routes whose members answered
 * what the route cannot use: the same call fails again until the route or its models change.
 */
export const GRPC_STATUS_EXCEPTIONS: Readonly<Partial<Record<ErrorCode, status>>> = {
  pool_saturated: status.RESOURCE_EXHAUSTED,
  connection_limit: status.RESOURCE_EXHAUSTED,
  buffer_full: status.RESOURCE_EXHAUSTED,
  composite_saturated: status.RESOURCE_EXHAUSTED,
  ensemble_mismatch: status.FAILED_PRECONDITION,
  sequence_mapping: status.FAILED_PRECONDITION,
  sequence_step_failed: status.FAILED_PRECONDITION,
  composite_member_limit: status.FAILED_PRECONDITION,
};

export function grpcStatus(code: ErrorCode): status {
  return GRPC_STATUS_EXCEPTIONS[code] ?? GRPC_STATUS_BY_HTTP[ERROR_CATALOGUE[code].status] ?? status.UNKNOWN;
}

/** A status's name as metrics label it (`INVALID_ARGUMENT`). */
export function grpcStatusName(code: status): string {
  return status[code] ?? String(code);
}

/**
 * A call's answer metadata, headers or trailers, as the servers here write it: text entries by
 * lowercase name, set by our own code (never a client's), so no grpc-js Metadata is built to check
 * them on every call.
 */
export type CallMetadata = Record<string, string>;

/** A catalogue error as a gRPC call's error: its status and message, its code in `metadata` (sent as trailers). */
export function grpcError(err: ModelmuxError, metadata: CallMetadata = {}): { code: status; details: string; metadata: CallMetadata } {
  Object.assign(metadata, errorHeaders(err));
  return { code: grpcStatus(err.code), details: err.message, metadata };
}

/** The trailers of a catalogue error: its code, and whether it was refused before any work. */
export function errorHeaders(err: ModelmuxError): Record<string, string> {
  const out: Record<string, string> = { [ERROR_CODE_TRAILER]: err.code };
  // Refused before any work: a router may send the call to another replica (as for HTTP).
  if (refusedBeforeWork(err.code)) out[HEADER_OVERLOADED] = 'true';
  return out;
}
