import { ConfigError } from '../../../common/config.js';
import { REPLICA_ENV, REPLICA_GRPC_PORT, REPLICA_PORT } from '../../../common/replica-env.js';
import { DEFAULT_RUNTIME_HTTP_PORT } from '../../../common/runtime-spec.js';
import { parseReplicaConfig } from '../../../replica/config.js';
import { grpcServerOptions } from '../../../replica/grpc-options.js';

const source = ['--model-source', 'file:///models'];

describe("the replica's gRPC port", () => {
  it('defaults to 8033, none of the ports a sidecar runtime in the pod uses by default', () => {
    expect(parseReplicaConfig(source, {}).grpcPort).toBe(REPLICA_GRPC_PORT);
    expect(REPLICA_GRPC_PORT).toBe(8033);
    expect([REPLICA_PORT, DEFAULT_RUNTIME_HTTP_PORT]).not.toContain(REPLICA_GRPC_PORT);
  });

  it('takes 0 (any free port) and -1 (no gRPC) from the flag or the environment, the flag winning', () => {
    expect(parseReplicaConfig([...source, '--grpc-port=-1'], {}).grpcPort).toBe(-1);
    expect(parseReplicaConfig(source, { [REPLICA_ENV.grpcPort]: '0' }).grpcPort).toBe(0);
    expect(parseReplicaConfig([...source, '--grpc-port', '9000'], { [REPLICA_ENV.grpcPort]: '0' }).grpcPort).toBe(9000);
  });

  it('refuses a port out of range, naming the flag and its variable', () => {
    for (const bad of ['-2', '65536', 'grpc']) {
      expect(() => parseReplicaConfig([...source, `--grpc-port=${bad}`], {})).toThrow(ConfigError);
    }
    expect(() => parseReplicaConfig([...source, '--grpc-port=-2'], {})).toThrow(/--grpc-port\/MODELMUX_GRPC_PORT/);
  });
});

describe("the gRPC server's bounds", () => {
  it('bounds a message by the HTTP body limit and every connection in time', () => {
    const o = grpcServerOptions({ maxBodyBytes: 8 * 1024 ** 2, maxOngoingRequests: 16, requestTimeoutMs: 60_000 });
    expect(o['grpc.max_receive_message_length']).toBe(8 * 1024 ** 2);
    expect(o['grpc.max_connection_age_grace_ms']).toBe(60_000);
    for (const key of ['grpc.max_connection_idle_ms', 'grpc.max_connection_age_ms', 'grpc.keepalive_time_ms', 'grpc.keepalive_timeout_ms'] as const) expect(o[key]).toBeGreaterThan(0);
    // Enough HTTP/2 session memory (MiB) for a full replica's messages on one connection, as a router sends them.
    expect(o['grpc-node.max_session_memory']).toBe(128);
    expect(o['grpc.max_concurrent_streams']).toBe(100);
    expect(grpcServerOptions({ maxBodyBytes: 1024, maxOngoingRequests: 500, requestTimeoutMs: 1000 })['grpc.max_concurrent_streams']).toBe(1000);
  });
});
