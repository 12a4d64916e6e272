import { expect, jest } from '@jest/globals';
import { status } from '@grpc/grpc-js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { InferTensorContents, ModelInferResponse, ModelMetadataResponse } from '../../../common/grpc/inference-service.js';
import type { OnnxElemType } from '../../../common/onnx-writer.js';
import { wineModelBytes } from '../../../common/wine-model.js';
import { castModel, identityModel, writeModel } from '../../helpers/datatype-models.js';
import { inferenceClientFor, type InferenceClient } from '../../helpers/grpc-client.js';
import { inFlightAt } from '../../helpers/in-flight.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';

jest.setTimeout(60_000);

/**
 * The replica's gRPC service (inference.GRPCInferenceService) with grpc-js against a real replica
 * process and real ONNX models: every datatype in typed and in raw contents, compared with what
 * the same replica answers over HTTP (binary tensor data); metadata, health, and the error codes.
 */

interface Case {
  datatype: string;
  type: OnnxElemType;
  /** Three elements at the type's edges, little-endian (BYTES: length-prefixed). */
  raw: Buffer;
  /** The same elements as typed contents; none for FP16 and BF16. */
  typed?: InferTensorContents;
}

const le = (view: ArrayBufferView): Buffer => Buffer.from(view.buffer, view.byteOffset, view.byteLength);
const lengthPrefixed = (strings: string[]): Buffer =>
  Buffer.concat(
    strings.flatMap((s) => {
      const b = Buffer.from(s);
      const n = Buffer.alloc(4);
      n.writeUInt32LE(b.length);
      return [n, b];
    }),
  );

const CASES: Case[] = [
  { datatype: 'BOOL', type: 'bool', raw: le(Uint8Array.from([1, 0, 1])), typed: { bool_contents: [true, false, true] } },
  { datatype: 'UINT8', type: 'uint8', raw: le(Uint8Array.from([0, 7, 255])), typed: { uint_contents: [0, 7, 255] } },
  { datatype: 'UINT16', type: 'uint16', raw: le(Uint16Array.from([0, 7, 65535])), typed: { uint_contents: [0, 7, 65535] } },
  { datatype: 'UINT32', type: 'uint32', raw: le(Uint32Array.from([0, 7, 4294967295])), typed: { uint_contents: [0, 7, 4294967295] } },
  { datatype: 'UINT64', type: 'uint64', raw: le(BigUint64Array.from([0n, 9007199254740993n, 18446744073709551615n])), typed: { uint64_contents: ['0', '9007199254740993', '18446744073709551615'] } },
  { datatype: 'INT8', type: 'int8', raw: le(Int8Array.from([-128, 0, 127])), typed: { int_contents: [-128, 0, 127] } },
  { datatype: 'INT16', type: 'int16', raw: le(Int16Array.from([-32768, 1, 32767])), typed: { int_contents: [-32768, 1, 32767] } },
  { datatype: 'INT32', type: 'int32', raw: le(Int32Array.from([-2147483648, 1, 2147483647])), typed: { int_contents: [-2147483648, 1, 2147483647] } },
  {
    datatype: 'INT64',
    type: 'int64',
    raw: le(BigInt64Array.from([-9223372036854775808n, -9007199254740993n, 9223372036854775807n])),
    typed: { int64_contents: ['-9223372036854775808', '-9007199254740993', '9223372036854775807'] },
  },
  { datatype: 'FP16', type: 'float16', raw: le(Uint16Array.from([0x3e00, 0x7bff, 0xfc00])) },
  { datatype: 'BF16', type: 'bfloat16', raw: le(Uint16Array.from([0x3fc0, 0xff80, 0x8000])) },
  { datatype: 'FP32', type: 'float32', raw: le(Float32Array.from([1.5, Infinity, NaN])), typed: { fp32_contents: [1.5, Infinity, NaN] } },
  { datatype: 'FP64', type: 'float64', raw: le(Float64Array.from([0.1, -Infinity, 1e300])), typed: { fp64_contents: [0.1, -Infinity, 1e300] } },
  { datatype: 'BYTES', type: 'string', raw: lengthPrefixed(['a', 'héllo', '']), typed: { bytes_contents: [Buffer.from('a'), Buffer.from('héllo'), Buffer.alloc(0)] } },
];

/** What the replica answers over HTTP for the same raw input: the bytes of output y. */
async function httpBinaryAnswer(url: string, id: string, datatype: string, raw: Buffer): Promise<Buffer> {
  const head = Buffer.from(JSON.stringify({ inputs: [{ name: 'x', datatype, shape: [1, 3], parameters: { binary_data_size: raw.length } }], parameters: { binary_data_output: true } }));
  const res = await fetch(`${url}/v2/models/${id}/infer`, { method: 'POST', headers: { 'inference-header-content-length': String(head.length) }, body: Buffer.concat([head, raw]) });
  expect(res.status).toBe(200);
  const all = Buffer.from(await res.arrayBuffer());
  return all.subarray(Number(res.headers.get('inference-header-content-length')));
}

const MAX_BODY_BYTES = 64 * 1024;
let dir: string;
let r: ReplicaProcess;
let client: InferenceClient;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-grpc-'));
  for (const c of CASES) writeModel(dir, `identity-${c.type}`, identityModel(c.type));
  writeModel(dir, 'cast-float32-float16', castModel('float32', 'float16'));
  writeModel(dir, 'wine-1', wineModelBytes('wine-1'));
  r = await startReplica({
    args: [
      '--model-source',
      pathToFileURL(dir).href,
      '--max-models',
      '20',
      '--max-body-bytes',
      String(MAX_BODY_BYTES),
      '--max-ongoing-requests',
      '2',
      '--test-hooks',
      'true',
      '--request-timeout-ms',
      '3000',
    ],
  });
  client = inferenceClientFor(r.grpcAddress as string);
});

afterAll(async () => {
  client?.close();
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe.each(CASES)('$datatype over gRPC', (c) => {
  const id = `identity-${c.type}`;

  it('answers raw contents as the replica answers binary data over HTTP, byte for byte', async () => {
    const a = await client.call<ModelInferResponse>('ModelInfer', { model_name: id, id: 'q1', inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3] }], raw_input_contents: [c.raw] });
    if (!a.ok) throw new Error(a.details);
    expect(a.value).toMatchObject({ model_name: id, id: 'q1', outputs: [{ name: 'y', datatype: c.datatype, shape: ['1', '3'], contents: null }] });
    expect(a.value.raw_output_contents).toHaveLength(1);
    const viaHttp = await httpBinaryAnswer(r.url, id, c.datatype, c.raw);
    expect(Buffer.from(a.value.raw_output_contents[0]!).equals(viaHttp)).toBe(true);
    // An identity model: the replica's answer is its input.
    expect(viaHttp.equals(c.raw)).toBe(true);
  });

  if (c.typed !== undefined) {
    const typed = c.typed;
    it('answers typed contents with typed contents of the same elements', async () => {
      const a = await client.call<ModelInferResponse>('ModelInfer', { model_name: id, inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3], contents: typed }] });
      if (!a.ok) throw new Error(a.details);
      expect(a.value.raw_output_contents).toEqual([]);
      const [field, want] = Object.entries(typed as Record<string, unknown>)[0]!;
      const got = (a.value.outputs[0]!.contents as Record<string, unknown[]>)[field]!;
      if (c.datatype === 'BYTES') expect(got.map((b) => Buffer.from(b as Uint8Array).toString())).toEqual(['a', 'héllo', '']);
      else expect(got).toEqual(want);
    });
  }
});

describe('FP16 computed by the graph', () => {
  it('answers in raw contents what the HTTP form answers, to a typed FP32 request', async () => {
    const a = await client.call<ModelInferResponse>('ModelInfer', {
      model_name: 'cast-float32-float16',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], contents: { fp32_contents: [1.5, 65504, 1e9] } }],
    });
    if (!a.ok) throw new Error(a.details);
    const viaHttp = await httpBinaryAnswer(r.url, 'cast-float32-float16', 'FP32', le(Float32Array.from([1.5, 65504, 1e9])));
    expect(a.value.outputs[0]).toMatchObject({ datatype: 'FP16', contents: null });
    expect(Buffer.from(a.value.raw_output_contents[0]!).equals(viaHttp)).toBe(true);
    expect([...new Uint16Array(new Uint8Array(viaHttp).buffer)]).toEqual([0x3e00, 0x7bff, 0x7c00]);
  });
});

describe('health and metadata', () => {
  it('answers ServerLive, ServerReady and ServerMetadata', async () => {
    expect(await client.call('ServerLive', {})).toMatchObject({ ok: true, value: { live: true } });
    expect(await client.call('ServerReady', {})).toMatchObject({ ok: true, value: { ready: true } });
    expect(await client.call('ServerMetadata', {})).toMatchObject({ ok: true, value: { name: 'modelmux-replica', version: '1', extensions: [] } });
  });

  it('answers ModelMetadata as GET /v2/models/<id>, and ModelReady as the cache holds the model', async () => {
    await client.call('ModelInfer', { model_name: 'identity-uint8', inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, 3] }], raw_input_contents: [Buffer.alloc(3)] });
    expect(await client.call('ModelReady', { name: 'identity-uint8' })).toMatchObject({ ok: true, value: { ready: true } });
    expect(await client.call('ModelReady', { name: 'wine-1' })).toMatchObject({ ok: true, value: { ready: false } });
    const m = await client.call<ModelMetadataResponse>('ModelMetadata', { name: 'wine-1' });
    if (!m.ok) throw new Error(m.details);
    const http = (await (await fetch(`${r.url}/v2/models/wine-1`)).json()) as Record<string, { name: string; datatype: string; shape: number[] }[]>;
    const asGrpc = (list: { name: string; datatype: string; shape: number[] }[]) => list.map((t) => ({ ...t, shape: t.shape.map(String) }));
    expect(m.value).toMatchObject({ name: 'wine-1', platform: 'onnxruntime_onnx', inputs: asGrpc(http['inputs']!), outputs: asGrpc(http['outputs']!) });
    expect(m.value.inputs[0]!.shape[0]).toBe('-1');
    expect(m.trailers).toMatchObject({ 'x-modelmux-cache': 'miss', 'x-modelmux-replica': expect.any(String) });
  });
});

describe('errors', () => {
  const infer = (request: object, options?: { deadlineMs?: number; metadata?: Record<string, string> }) => client.call<ModelInferResponse>('ModelInfer', request, options);

  it('answers an unknown model NOT_FOUND, its code and the request id in trailers', async () => {
    const a = await infer({ model_name: 'no-such-model', inputs: [] }, { metadata: { 'x-request-id': 'grpc-test-1' } });
    expect(a).toMatchObject({
      ok: false,
      code: status.NOT_FOUND,
      details: expect.stringContaining('no-such-model'),
      trailers: { 'x-modelmux-error-code': 'model_not_found', 'x-request-id': 'grpc-test-1' },
    });
  });

  it('answers a malformed model id or version INVALID_ARGUMENT', async () => {
    expect(await infer({ model_name: '../etc', inputs: [] })).toMatchObject({ ok: false, code: status.INVALID_ARGUMENT, trailers: { 'x-modelmux-error-code': 'invalid_model_id' } });
    expect(await infer({ model_name: 'wine-1', model_version: 'v2', inputs: [] })).toMatchObject({ ok: false, code: status.INVALID_ARGUMENT, details: expect.stringContaining('1 to 18 digits') });
  });

  it('answers a tensor that does not fit the model INVALID_ARGUMENT input_mismatch', async () => {
    const a = await infer({ model_name: 'wine-1', inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 10], contents: { fp32_contents: Array(10).fill(1) } }] });
    expect(a).toMatchObject({ ok: false, code: status.INVALID_ARGUMENT, details: expect.stringContaining('dim 1'), trailers: { 'x-modelmux-error-code': 'input_mismatch' } });
    const short = await infer({ model_name: 'wine-1', inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 11] }], raw_input_contents: [Buffer.alloc(40)] });
    expect(short).toMatchObject({ ok: false, code: status.INVALID_ARGUMENT, details: expect.stringContaining('40 bytes'), trailers: { 'x-modelmux-error-code': 'input_mismatch' } });
  });

  it('refuses a message larger than --max-body-bytes RESOURCE_EXHAUSTED, and serves on', async () => {
    const n = MAX_BODY_BYTES / 4;
    const a = await infer({ model_name: 'identity-float32', inputs: [{ name: 'x', datatype: 'FP32', shape: [n / 3, 3] }], raw_input_contents: [Buffer.alloc(4 * (n - (n % 3)))] });
    expect(a).toMatchObject({ ok: false, code: status.RESOURCE_EXHAUSTED });
    expect(await client.call('ServerLive', {})).toMatchObject({ ok: true });
  });

  it('refuses past --max-ongoing-requests UNAVAILABLE overloaded, counting HTTP and gRPC together', async () => {
    const body = { model_name: 'wine-1', inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 11], contents: { fp32_contents: Array(11).fill(1) } }] };
    const held = infer(body, { metadata: { 'x-modelmux-test-delay-ms': '1500' } });
    const httpHeld = fetch(`${r.url}/v2/models/wine-1/infer`, {
      method: 'POST',
      headers: { 'x-modelmux-test-delay-ms': '1500' },
      body: JSON.stringify({ inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 11], data: Array(11).fill(1) }] }),
    });
    // Both are admitted once the replica counts them; then a third is refused at once.
    await inFlightAt(r, 2, 5000);
    const refused = await infer(body);
    expect(refused).toMatchObject({ ok: false, code: status.UNAVAILABLE, trailers: { 'x-modelmux-error-code': 'overloaded', 'x-modelmux-overloaded': 'true' } });
    expect((await held).ok).toBe(true);
    expect((await httpHeld).status).toBe(200);
  });

  it('stops waiting for a call whose deadline passed, and answers DEADLINE_EXCEEDED past --request-timeout-ms', async () => {
    const body = { model_name: 'wine-1', inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 11], contents: { fp32_contents: Array(11).fill(1) } }] };
    const started = Date.now();
    const a = await infer(body, { deadlineMs: 300, metadata: { 'x-modelmux-test-delay-ms': '2500' } });
    expect(a).toMatchObject({ ok: false, code: status.DEADLINE_EXCEEDED });
    expect(Date.now() - started).toBeLessThan(2000);
    // The cancelled call no longer counts as ongoing, though the model run it started still holds its lease.
    await inFlightAt(r, 0, 1500);
    const slow = await infer(body, { metadata: { 'x-modelmux-test-delay-ms': '5000' } });
    expect(slow).toMatchObject({ ok: false, code: status.DEADLINE_EXCEEDED, trailers: { 'x-modelmux-error-code': 'timeout' } });
  });

  it('counts calls by method and gRPC status', async () => {
    const m = await r.metrics();
    expect(m.get('modelmux_replica_grpc_requests_total{method="ModelInfer",code="OK"}')).toBeGreaterThanOrEqual(CASES.length);
    expect(m.get('modelmux_replica_grpc_requests_total{method="ModelInfer",code="NOT_FOUND"}')).toBeGreaterThanOrEqual(1);
    expect(m.get('modelmux_replica_grpc_requests_total{method="ModelInfer",code="UNAVAILABLE"}')).toBeGreaterThanOrEqual(1);
    expect(m.get('modelmux_replica_grpc_request_duration_seconds_count{method="ModelInfer"}')).toBeGreaterThanOrEqual(CASES.length);
  });
});

it('serves no gRPC with --grpc-port=-1', async () => {
  const off = await startReplica({ grpcPort: -1, args: ['--model-source', pathToFileURL(dir).href] });
  try {
    expect(off.grpcAddress).toBeUndefined();
    expect(off.logLines().find((l) => l['event'] === 'listening')).not.toHaveProperty('grpcPort');
  } finally {
    await off.stop();
  }
});

it('answers the calls in progress at SIGTERM, then exits 0', async () => {
  const draining = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--test-hooks', 'true'] });
  const c = inferenceClientFor(draining.grpcAddress as string);
  try {
    const body = { model_name: 'wine-1', inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 11], contents: { fp32_contents: Array(11).fill(1) } }] };
    expect((await c.call('ModelInfer', body)).ok).toBe(true);
    const held = c.call<ModelInferResponse>('ModelInfer', body, { metadata: { 'x-modelmux-test-delay-ms': '1000' } });
    await inFlightAt(draining, 1, 5000);
    const exit = draining.stop(10_000);
    const answer = await held;
    expect(answer).toMatchObject({ ok: true, value: { outputs: [{ name: 'quality', datatype: 'FP32' }] } });
    expect(await exit).toBe(0);
  } finally {
    c.close();
  }
});
