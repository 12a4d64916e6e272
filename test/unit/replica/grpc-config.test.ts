import { ConfigError } from '../../../common/config.js';
import { REPLICA_ENV, REPLICA_GRPC_PORT, REPLICA_PORT } from '../../../common/replica-env.js';
import { DEFAULT_RUNTIME_HTTP_PORT } from '../../../common/runtime-spec.js';
import { parseReplicaConfig } from '../../../replica/config.js';
import { grpcServerLimits } from '../../../replica/grpc/grpc-options.js';

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
  it('bound a message by the HTTP body limit, every phase of a call and every connection in time, and no reset budget', () => {
    const l = grpcServerLimits(parseReplicaConfig(source, {}));
    expect(l.maxMessageBytes).toBe(8 * 1024 ** 2);
    expect(l.graceMs).toBe(60_000);
    expect(l.maxConnections).toBe(4096);
    for (const key of ['messageTimeoutMs', 'messageIdleTimeoutMs', 'writeTimeoutMs', 'idleTimeoutMs', 'maxConnectionAgeMs', 'keepaliveMs', 'keepaliveTimeoutMs'] as const)
      expect(l[key]).toBeGreaterThan(0);
    // A router forwards all its clients' cancellations over one connection: the router budgets them, not the replica.
    expect(l.resets.maxResets).toBe(0);
    expect(l.maxConcurrentStreams).toBe(100);
    expect(grpcServerLimits(parseReplicaConfig([...source, '--max-ongoing-requests', '500'], {})).maxConcurrentStreams).toBe(1000);
  });
});
