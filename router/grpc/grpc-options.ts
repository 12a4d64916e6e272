import type { UnaryServerLimits } from '../../common/grpc/unary-server.js';
import type { GrpcSessionLimits } from './grpc-sessions.js';

/** Triton's gRPC port, so a Triton client's default reaches the router. */
export const DEFAULT_GRPC_PORT = 8001;

/** Calls a client may reset before their answer within RESET_WINDOW_MS (and more than half of its calls) before it is cut off. */
export const DEFAULT_GRPC_MAX_RESETS = 200;
export const RESET_WINDOW_MS = 10_000;

/**
 * The server pings a client connection this often and closes it when the ping is not answered
 * within `KEEPALIVE_TIMEOUT_MS`: a client that vanished without a FIN does not hold its calls,
 * and their replica slots, until the request deadline.
 */
export const KEEPALIVE_TIME_MS = 60_000;
export const KEEPALIVE_TIMEOUT_MS = 20_000;

/** A connection to a replica not established this long is given up (its tries fail over, the next call dials anew). */
const UPSTREAM_CONNECT_TIMEOUT_MS = 5000;
/** Calls the router opens at once on one connection to a replica before it opens another, and connections per replica. */
const UPSTREAM_STREAMS_PER_SESSION = 100;
const UPSTREAM_SESSIONS = 8;

/** The router's flags that bound its gRPC port (router/config.ts), HTTP's where both have the bound. */
export interface GrpcFlags {
  maxBodyBytes: number;
  grpcMaxConcurrentStreams: number;
  grpcMaxConnectionAgeMs: number;
  grpcMaxResetsPerClient: number;
  keepAliveTimeoutMs: number;
  bodyTimeoutMs: number;
  bodyIdleTimeoutMs: number;
  writeTimeoutMs: number;
  shutdownGraceMs: number;
  maxConnections: number;
  maxConnectionsPerClient: number;
  grpcFraming: 'own' | 'nghttp2';
}

/** The bounds of the router's gRPC server: each HTTP bound applies to gRPC under the same flag (docs/limits.md). */
export function grpcServerLimits(f: GrpcFlags): UnaryServerLimits {
  return {
    maxMessageBytes: f.maxBodyBytes,
    maxConcurrentStreams: f.grpcMaxConcurrentStreams,
    maxConnections: f.maxConnections,
    maxConnectionsPerClient: f.maxConnectionsPerClient,
    messageTimeoutMs: f.bodyTimeoutMs,
    messageIdleTimeoutMs: f.bodyIdleTimeoutMs,
    writeTimeoutMs: f.writeTimeoutMs,
    idleTimeoutMs: f.keepAliveTimeoutMs,
    maxConnectionAgeMs: f.grpcMaxConnectionAgeMs,
    graceMs: f.shutdownGraceMs,
    keepaliveMs: KEEPALIVE_TIME_MS,
    keepaliveTimeoutMs: KEEPALIVE_TIMEOUT_MS,
    resets: { maxResets: f.grpcMaxResetsPerClient, windowMs: RESET_WINDOW_MS },
  };
}

/** The bounds of the router's connections to the replicas' gRPC ports (grpc-sessions.ts). */
export function grpcSessionLimits(): GrpcSessionLimits {
  return { connectTimeoutMs: UPSTREAM_CONNECT_TIMEOUT_MS, maxStreamsPerSession: UPSTREAM_STREAMS_PER_SESSION, maxSessions: UPSTREAM_SESSIONS };
}
