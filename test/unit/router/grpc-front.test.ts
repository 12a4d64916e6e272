import type { V1Pod } from '@kubernetes/client-node';
import { ProtoWriter } from '../../../common/proto-wire.js';
import { inferenceServiceDefinition } from '../../../common/grpc/inference-service.js';
import { silentLogger } from '../../../common/log.js';
import { peerAddress } from '../../../router/grpc-exchange.js';
import { addressedTo, decodeGrpcHead, readForwarded } from '../../../router/grpc-head.js';
import { grpcServerOptions } from '../../../router/grpc-options.js';
import { podGrpcAddress, routesFromObjects } from '../../../router/kube-discovery.js';
import { parseStaticRoutes } from '../../../router/static-discovery.js';

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
    expect(decodeGrpcHead(sent)).toEqual({ name: 'wine-9', version: '2', id: 'req-1' });
  });

  it('clears a version the message had when the backend is unversioned, for metadata and readiness requests too', () => {
    const infer = addressedTo(encode('ModelInfer', { ...request, model_version: '7' }), 'stable');
    expect([decode('ModelInfer', infer)['model_name'], decode('ModelInfer', infer)['model_version']]).toEqual(['stable', '']);
    const ready = addressedTo(encode('ModelReady', { name: 'canary', version: '7' }), 'u1@3');
    expect(decode('ModelReady', ready)).toMatchObject({ name: 'u1', version: '3' });
  });
});

describe('decodeGrpcHead', () => {
  it('reads the model name, version and id of a ModelInferRequest and nothing else', () => {
    const raw = encode('ModelInfer', {
      model_name: 'wine',
      model_version: '3',
      id: 'req-1',
      parameters: { priority: { int64_param: 2 } },
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], contents: { fp32_contents: [1, 2, 3] } }],
      raw_input_contents: [Buffer.alloc(1024, 7)],
    });
    expect(decodeGrpcHead(raw)).toEqual({ name: 'wine', version: '3', id: 'req-1' });
    const forwarded = readForwarded(raw);
    expect(forwarded.raw).toBe(raw);
  });

  it('reads the name and version of ModelMetadata and ModelReady requests', () => {
    expect(decodeGrpcHead(encode('ModelMetadata', { name: 'beer', version: '' }))).toEqual({ name: 'beer', version: '', id: '' });
    expect(decodeGrpcHead(encode('ModelReady', { name: 'beer', version: '12' }))).toEqual({ name: 'beer', version: '12', id: '' });
  });

  it('finds the head after the tensors, as a message with its fields in another order has it', () => {
    const raw = new ProtoWriter().bytes(7, new Uint8Array(4096)).string(1, 'late').string(3, 'i').finish();
    expect(decodeGrpcHead(raw)).toEqual({ name: 'late', version: '', id: 'i' });
  });

  it('gives undefined for bytes that are not a protobuf message, and for an empty one an empty head', () => {
    expect(decodeGrpcHead(Buffer.from([0x0a, 0x10, 0x61]))).toBeUndefined();
    expect(decodeGrpcHead(Buffer.from([0xff, 0xff, 0xff]))).toBeUndefined();
    expect(readForwarded(Buffer.from([0x0a, 0x05])).head).toBeUndefined();
    expect(decodeGrpcHead(Buffer.alloc(0))).toEqual({ name: '', version: '', id: '' });
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
    const mxd = { apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', metadata: { name: 'wine', namespace: 'ml' }, spec: { routePrefix: '/wine', modelSource: { uri: 's3://models/wine' } } };
    const routes = routesFromObjects([mxd], [withGrpc, without], silentLogger);
    expect(routes[0]?.replicas.map((r) => r.grpc)).toEqual(['10.0.0.1:8081', undefined]);
  });
});

describe('peerAddress', () => {
  it('drops the port of a grpc-js peer, as X-Forwarded-For carries an address', () => {
    expect(peerAddress('127.0.0.1:53122')).toBe('127.0.0.1');
    expect(peerAddress('[::1]:53122')).toBe('::1');
    expect(peerAddress('unix-socket')).toBe('unix-socket');
  });
});

describe('gRPC server options', () => {
  const limits = { maxRequestBytes: 1000, maxResponseBytes: 2000, maxConcurrentStreams: 8, idleTimeoutMs: 65_000, maxConnectionAgeMs: 0, graceMs: 25_000 };

  it('bound messages, streams and idle connections, and age connections only when asked', () => {
    const o = grpcServerOptions(limits);
    expect(o).toMatchObject({ 'grpc.max_receive_message_length': 1000, 'grpc.max_send_message_length': 2000, 'grpc.max_concurrent_streams': 8, 'grpc.max_connection_idle_ms': 65_000 });
    expect(o['grpc.max_connection_age_ms']).toBeUndefined();
    expect(grpcServerOptions({ ...limits, maxConnectionAgeMs: 600_000 })).toMatchObject({ 'grpc.max_connection_age_ms': 600_000, 'grpc.max_connection_age_grace_ms': 25_000 });
  });
});
