import type { UnaryServerLimits } from '../../common/grpc/unary-server.js';

/**
 * The replica's gRPC bounds, after the project's rule that every phase of a connection has a
 * limit (ADR 0026, ADR 0039). Pure.
 */

/** A connection with no call in progress this long is closed (GOAWAY); clients reconnect on their next call. */
export const GRPC_MAX_IDLE_MS = 300_000;
/** Every connection is asked to go away after this long (its calls given the request timeout to end). */
export const GRPC_MAX_AGE_MS = 30 * 60_000;
/** The server pings a connection this often, and closes it when the ping is not answered in GRPC_KEEPALIVE_TIMEOUT_MS. */
export const GRPC_KEEPALIVE_MS = 30_000;
export const GRPC_KEEPALIVE_TIMEOUT_MS = 10_000;

/** The replica's flags that bound its gRPC port (replica/config.ts). */
export interface ReplicaGrpcFlags {
  maxBodyBytes: number;
  maxOngoingRequests: number;
  maxConnections: number;
  requestTimeoutMs: number;
  bodyTimeoutMs: number;
  bodyIdleTimeoutMs: number;
  writeTimeoutMs: number;
}

export function grpcServerLimits(f: ReplicaGrpcFlags): UnaryServerLimits {
  return {
    // The HTTP body limit bounds a gRPC message alike, refused from its 5-byte prefix.
    maxMessageBytes: f.maxBodyBytes,
    // A router multiplexes its calls to a replica over one connection: let it carry as many as the replica admits.
    maxConcurrentStreams: Math.max(100, 2 * f.maxOngoingRequests),
    maxConnections: f.maxConnections,
    // Routers are few addresses with many calls each.
    maxConnectionsPerClient: 0,
    messageTimeoutMs: f.bodyTimeoutMs,
    messageIdleTimeoutMs: f.bodyIdleTimeoutMs,
    writeTimeoutMs: f.writeTimeoutMs,
    idleTimeoutMs: GRPC_MAX_IDLE_MS,
    maxConnectionAgeMs: GRPC_MAX_AGE_MS,
    graceMs: f.requestTimeoutMs,
    keepaliveMs: GRPC_KEEPALIVE_MS,
    keepaliveTimeoutMs: GRPC_KEEPALIVE_TIMEOUT_MS,
    // Off: a router forwards its clients' cancellations over one connection, and budgets its
    // clients' resets itself; cutting it off would cut every client behind it.
    resets: { maxResets: 0, windowMs: 0 },
  };
}
