import type { ChannelOptions } from '@grpc/grpc-js';
import type { UnaryServerLimits } from '../../common/grpc/unary-server.js';

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

/** A replica channel that lost its connection tries again soon: discovery, not backoff, says when a replica is gone. */
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 2000;

/** The router's flags that bound its gRPC port (router/config.ts), HTTP's where both have the bound. */
export interface GrpcFlags {
  maxBodyBytes: number;
  grpcMaxResponseBytes: number;
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

/**
 * grpc-js options of the channel to one replica: the same message bounds, and no retries of
 * grpc-js's own, so that the router's retry rules (ADR 0030) are the only ones.
 */
export function grpcUpstreamOptions(f: GrpcFlags): ChannelOptions {
  return {
    'grpc.max_send_message_length': f.maxBodyBytes,
    'grpc.max_receive_message_length': f.grpcMaxResponseBytes,
    'grpc.enable_retries': 0,
    'grpc.initial_reconnect_backoff_ms': RECONNECT_MIN_MS,
    'grpc.max_reconnect_backoff_ms': RECONNECT_MAX_MS,
  };
}
