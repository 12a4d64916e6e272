import type { V1Pod } from '@kubernetes/client-node';
import { inferenceServiceDefinition } from '../../../common/grpc/inference-service.js';
import { silentLogger } from '../../../common/log.js';
import { scanRequest } from '../../../common/grpc/message-scan.js';
import { addressedTo } from '../../../router/grpc/grpc-head.js';
import { grpcServerLimits } from '../../../router/grpc/grpc-options.js';
import { parseRouterConfig } from '../../../router/config.js';
import { podGrpcAddress, routesFromObjects } from '../../../router/discovery/kube-discovery.js';
import { parseStaticRoutes } from '../../../router/discovery/static-discovery.js';

const encode = (method: string, message: unknown): Buffer => (inferenceServiceDefinition()[method] as { requestSerialize(v: unknown): Buffer }).requestSerialize(message);
const decode = (method: string, raw: Buffer): Record<string, unknown> => (inferenceServiceDefinition()[method] as { requestDeserialize(b: Buffer): Record<string, unknown> }).requestDeserialize(raw);

describe('addressedTo', () => {
  const request = {
    model_name: 'canary',
    id: 'req-1',
    inputs: [{ name: 'x', datatype: 'FP32', shape: ['1', '3'], contents: { fp32_contents: [1, 2, 3] } }],
    raw_input_contents: [Buffer.alloc(64, 7)],
  };

  it('names the backend and its version to a full decoder, every other field as it was, the bytes received kept as a prefix', () => {
    const raw = encode('ModelInfer', request);
    const sent = addressedTo(raw, 'wine-9@2');
    expect(sent.subarray(0, raw.length)).toEqual(raw);
    const { model_name, model_version, ...rest } = decode('ModelInfer', sent);
    expect([model_name, model_version]).toEqual(['wine-9', '2']);
    const { model_name: _n, model_version: _v, ...before } = decode('ModelInfer', raw);
    expect(rest).toEqual(before);
    expect(scanRequest('ModelInfer', sent)).toEqual({ name: 'wine-9', version: '2', id: 'req-1' });
  });

  it('clears a version the message had when the backend is unversioned, for metadata and readiness requests too', () => {
    const infer = addressedTo(encode('ModelInfer', { ...request, model_version: '7' }), 'stable');
    expect([decode('ModelInfer', infer)['model_name'], decode('ModelInfer', infer)['model_version']]).toEqual(['stable', '']);
    const ready = addressedTo(encode('ModelReady', { name: 'canary', version: '7' }), 'u1@3');
    expect(decode('ModelReady', ready)).toMatchObject({ name: 'u1', version: '3' });
  });
});

describe('replicas’ gRPC addresses', () => {
  it('static routes take a replica’s gRPC port from its URL', () => {
    const { routes, problems } = parseStaticRoutes('/wine=http://127.0.0.1:1?grpc-port=9001,http://127.0.0.1:2');
    expect(problems).toEqual([]);
    expect(routes[0]?.urls).toEqual(['http://127.0.0.1:1', 'http://127.0.0.1:2']);
    expect([...(routes[0]?.grpc ?? [])]).toEqual([['http://127.0.0.1:1', '127.0.0.1:9001']]);
    expect(parseStaticRoutes('/wine=http://127.0.0.1:1?grpc-port=x').problems).toEqual(['route "/wine": "http://127.0.0.1:1?grpc-port=x": grpc-port must be a port number']);
    expect(parseStaticRoutes('/wine=http://127.0.0.1:1?grpc-port=70000').problems).toHaveLength(1);
  });

  it('kube discovery takes it from the replica container’s port named grpc', () => {
    const pod = (ip: string, ports: { name: string; containerPort: number }[]): V1Pod => ({
      metadata: { name: `p-${ip}`, namespace: 'ml', labels: { 'modelmux.io/deployment': 'wine' } },
      spec: { containers: [{ name: 'modelmux', ports }] },
      status: { phase: 'Running', podIP: ip, conditions: [{ type: 'Ready', status: 'True' }] },
    });
    const withGrpc = pod('10.0.0.1', [
      { name: 'http', containerPort: 8080 },
      { name: 'grpc', containerPort: 8081 },
    ]);
    const without = pod('10.0.0.2', [{ name: 'http', containerPort: 8080 }]);
    expect(podGrpcAddress(withGrpc)).toBe('10.0.0.1:8081');
    expect(podGrpcAddress(pod('fd00::1', [{ name: 'grpc', containerPort: 8081 }]))).toBe('[fd00::1]:8081');
    expect(podGrpcAddress(without)).toBeUndefined();
    const mxd = {
      apiVersion: 'modelmux.io/v1alpha1',
      kind: 'MultiplexedDeployment',
      metadata: { name: 'wine', namespace: 'ml' },
      spec: { routePrefix: '/wine', modelSource: { uri: 's3://models/wine' } },
    };
    const routes = routesFromObjects([mxd], [withGrpc, without], silentLogger);
    expect(routes[0]?.replicas.map((r) => r.grpc)).toEqual(['10.0.0.1:8081', undefined]);
  });
});

describe('the gRPC port’s bounds', () => {
  it('are the HTTP side’s flags: message size and timeouts, write timeout, idle connections, connection limits', () => {
    const c = parseRouterConfig(
      [
        '--routes',
        '/w=http://127.0.0.1:1',
        '--max-body-bytes',
        '1000',
        '--body-idle-timeout-ms',
        '5',
        '--body-timeout-ms',
        '6',
        '--write-timeout-ms',
        '7',
        '--keep-alive-timeout-ms',
        '8',
        '--max-connections',
        '9',
        '--max-connections-per-client',
        '3',
      ],
      {},
    );
    expect(grpcServerLimits(c)).toMatchObject({
      maxMessageBytes: 1000,
      messageIdleTimeoutMs: 5,
      messageTimeoutMs: 6,
      writeTimeoutMs: 7,
      idleTimeoutMs: 8,
      maxConnections: 9,
      maxConnectionsPerClient: 3,
      maxConnectionAgeMs: 0,
      resets: { maxResets: 200, windowMs: 10_000 },
    });
  });
});
