import type { ServerOptions } from '@grpc/grpc-js';

/**
 * The gRPC server's bounds, after the project's rule that every phase of a connection has a
 * limit (docs/adr/0026-hostile-clients-timeouts-and-slow-readers.md). Pure.
 */

/** A connection with no call in progress this long is closed (GOAWAY); clients reconnect on their next call. */
export const GRPC_MAX_IDLE_MS = 300_000;
/** Every connection is closed after this long (plus a grace of the request timeout), which also bounds a call whose message never finishes arriving. */
export const GRPC_MAX_AGE_MS = 30 * 60_000;
/** The server pings a connection silent this long, and closes it when the ping is not answered in GRPC_KEEPALIVE_TIMEOUT_MS. */
export const GRPC_KEEPALIVE_MS = 30_000;
export const GRPC_KEEPALIVE_TIMEOUT_MS = 10_000;

export function grpcServerOptions(o: { maxBodyBytes: number; maxOngoingRequests: number; requestTimeoutMs: number }): ServerOptions {
  return {
    // The HTTP body limit bounds a gRPC message alike; grpc-js refuses a longer one with RESOURCE_EXHAUSTED before reading it.
    'grpc.max_receive_message_length': o.maxBodyBytes,
    'grpc.keepalive_time_ms': GRPC_KEEPALIVE_MS,
    'grpc.keepalive_timeout_ms': GRPC_KEEPALIVE_TIMEOUT_MS,
    'grpc.max_connection_idle_ms': GRPC_MAX_IDLE_MS,
    'grpc.max_connection_age_ms': GRPC_MAX_AGE_MS,
    'grpc.max_connection_age_grace_ms': o.requestTimeoutMs,
    // A router multiplexes its calls to a replica over one connection: let it carry as many as the
    // replica admits, and the messages they bring (HTTP/2 buffers them per session, in MiB).
    'grpc.max_concurrent_streams': Math.max(100, 2 * o.maxOngoingRequests),
    'grpc-node.max_session_memory': Math.max(10, Math.ceil((o.maxOngoingRequests * o.maxBodyBytes) / 1024 ** 2)),
  };
}
