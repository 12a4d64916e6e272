import type { ChannelOptions } from '@grpc/grpc-js';

/** Triton's gRPC port, so a Triton client's default reaches the router. */
export const DEFAULT_GRPC_PORT = 8001;

/** The router's limits that bound its gRPC front (router/config.ts has the flags). */
export interface GrpcLimits {
  /** Largest request message (--max-body-bytes, as an HTTP body). */
  maxRequestBytes: number;
  /** Largest answer taken from a replica and sent on (--grpc-max-response-bytes). */
  maxResponseBytes: number;
  maxConcurrentStreams: number;
  /** A connection without a call this long is closed (--keep-alive-timeout-ms, as HTTP's). */
  idleTimeoutMs: number;
  /** 0: connections are never aged out. */
  maxConnectionAgeMs: number;
  /** How long an aged connection's calls may finish (--shutdown-grace-ms). */
  graceMs: number;
}

/**
 * The server pings a client connection after this long without frames and closes it when the
 * ping is not answered within `KEEPALIVE_TIMEOUT_MS`: a client that vanished without a FIN
 * does not hold its calls, and their replica slots, until the request deadline.
 */
export const KEEPALIVE_TIME_MS = 60_000;
export const KEEPALIVE_TIMEOUT_MS = 20_000;

/** A replica channel that lost its connection tries again soon: discovery, not backoff, says when a replica is gone. */
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 2000;

/** grpc-js options of the router's gRPC server (ADR 0037). */
export function grpcServerOptions(l: GrpcLimits): ChannelOptions {
  const options: ChannelOptions = {
    'grpc.max_receive_message_length': l.maxRequestBytes,
    'grpc.max_send_message_length': l.maxResponseBytes,
    'grpc.max_concurrent_streams': l.maxConcurrentStreams,
    'grpc.max_connection_idle_ms': l.idleTimeoutMs,
    'grpc.keepalive_time_ms': KEEPALIVE_TIME_MS,
    'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
  };
  if (l.maxConnectionAgeMs > 0) {
    options['grpc.max_connection_age_ms'] = l.maxConnectionAgeMs;
    options['grpc.max_connection_age_grace_ms'] = l.graceMs;
  }
  return options;
}

/**
 * grpc-js options of the channel to one replica: the same message bounds, and no retries of
 * grpc-js's own, so that the router's retry rules (ADR 0030) are the only ones.
 */
export function grpcUpstreamOptions(l: GrpcLimits): ChannelOptions {
  return {
    'grpc.max_send_message_length': l.maxRequestBytes,
    'grpc.max_receive_message_length': l.maxResponseBytes,
    'grpc.enable_retries': 0,
    'grpc.initial_reconnect_backoff_ms': RECONNECT_MIN_MS,
    'grpc.max_reconnect_backoff_ms': RECONNECT_MAX_MS,
  };
}
