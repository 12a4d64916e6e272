import { expect, jest } from '@jest/globals';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { OnnxElemType } from '../../../common/onnx-writer.js';
import { castModel, identityModel, passThroughModel, sequenceOutputModel, stringOutputModel, writeModel } from '../../helpers/datatype-models.js';
import { runNodeScript } from '../../helpers/node-script.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';

jest.setTimeout(60_000);

/**
 * Every V2 datatype through a real replica, in JSON and in binary, against onnxruntime-node's own
 * answer on the same model file in this process.
 */

type Values = (number | bigint | boolean | string)[];

interface Case {
  datatype: string;
  type: OnnxElemType;
  /** Three values, including each type's edges. */
  values: Values;
  /** Their little-endian bytes (or the strings) as the runtime takes them. */
  raw(values: Values): Buffer | string[];
}

const FLOATS: Record<string, number> = { inf: Infinity, '-inf': -Infinity, nan: NaN };
const asNumber = (x: number | bigint | boolean | string): number => (typeof x === 'string' ? (FLOATS[x] ?? Number(x)) : Number(x));
const bytes = (view: ArrayBufferView): Buffer => Buffer.from(view.buffer, view.byteOffset, view.byteLength);

const CASES: Case[] = [
  { datatype: 'BOOL', type: 'bool', values: [true, false, true], raw: (v) => bytes(Uint8Array.from(v.map((x) => (x ? 1 : 0)))) },
  { datatype: 'UINT8', type: 'uint8', values: [0, 7, 255], raw: (v) => bytes(Uint8Array.from(v.map(asNumber))) },
  { datatype: 'UINT16', type: 'uint16', values: [0, 7, 65535], raw: (v) => bytes(Uint16Array.from(v.map(asNumber))) },
  { datatype: 'UINT32', type: 'uint32', values: [0, 7, 4294967295], raw: (v) => bytes(Uint32Array.from(v.map(asNumber))) },
  { datatype: 'UINT64', type: 'uint64', values: [0n, 9007199254740993n, 18446744073709551615n], raw: (v) => bytes(BigUint64Array.from(v.map((x) => BigInt(x as bigint)))) },
  { datatype: 'INT8', type: 'int8', values: [-128, 0, 127], raw: (v) => bytes(Int8Array.from(v.map(asNumber))) },
  { datatype: 'INT16', type: 'int16', values: [-32768, 1, 32767], raw: (v) => bytes(Int16Array.from(v.map(asNumber))) },
  { datatype: 'INT32', type: 'int32', values: [-2147483648, 1, 2147483647], raw: (v) => bytes(Int32Array.from(v.map(asNumber))) },
  { datatype: 'INT64', type: 'int64', values: [-9223372036854775808n, -9007199254740993n, 9223372036854775807n], raw: (v) => bytes(BigInt64Array.from(v.map((x) => BigInt(x as bigint)))) },
  { datatype: 'FP32', type: 'float32', values: [1.5, 'inf', 'nan'], raw: (v) => bytes(Float32Array.from(v.map(asNumber))) },
  { datatype: 'FP64', type: 'float64', values: [0.1, '-inf', 1e300], raw: (v) => bytes(Float64Array.from(v.map(asNumber))) },
  { datatype: 'BYTES', type: 'string', values: ['a', 'héllo', ''], raw: (v) => v as string[] },
];

/** What onnxruntime answers, run in a Node process of its own (see test/helpers/node-script.ts). */
interface OrtOutput {
  type: string;
  dims: number[];
  /** base64 of the data's bytes, or the strings of a string tensor. */
  data: string | string[];
}

async function runHere(model: string, type: string, raw: Buffer | string[], dims: number[]): Promise<Record<string, OrtOutput>> {
  const input = JSON.stringify({ model, type, dims, data: Array.isArray(raw) ? raw : raw.toString('base64') });
  return runNodeScript<Record<string, OrtOutput>>(`
    import ort from 'onnxruntime-node';
    const { model, type, dims, data } = ${input};
    const ARRAYS = { bool: Uint8Array, uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array, int8: Int8Array, int16: Int16Array, int32: Int32Array, int64: BigInt64Array, float32: Float32Array, float64: Float64Array };
    const typed = (b) => { const buf = Buffer.from(b, 'base64'); const copy = new Uint8Array(buf).buffer; return new ARRAYS[type](copy); };
    const session = await ort.InferenceSession.create(model);
    const out = await session.run({ x: new ort.Tensor(type, type === 'string' ? data : typed(data), dims) });
    const answer = {};
    for (const [name, t] of Object.entries(out)) {
      answer[name] = { type: t.type, dims: t.dims, data: Array.isArray(t.data) ? t.data : Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString('base64') };
    }
    process.stdout.write(JSON.stringify(answer));
  `);
}

/** The JSON values the replica should answer for the runtime's output. */
function expectedJson(datatype: string, out: OrtOutput): unknown[] {
  if (Array.isArray(out.data)) return out.data;
  const buf = new Uint8Array(Buffer.from(out.data, 'base64')).buffer;
  const ARRAYS: Record<string, new (b: ArrayBuffer) => ArrayLike<number | bigint>> = {
    BOOL: Uint8Array,
    UINT8: Uint8Array,
    UINT16: Uint16Array,
    UINT32: Uint32Array,
    UINT64: BigUint64Array,
    INT8: Int8Array,
    INT16: Int16Array,
    INT32: Int32Array,
    INT64: BigInt64Array,
    FP16: (globalThis as unknown as { Float16Array: new (b: ArrayBuffer) => ArrayLike<number> }).Float16Array,
    FP32: Float32Array,
    FP64: Float64Array,
  };
  return Array.from(new ARRAYS[datatype]!(buf), (v) => {
    if (datatype === 'BOOL') return v !== 0;
    if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
    if (!Number.isFinite(v)) return Number.isNaN(v) ? 'nan' : v > 0 ? 'inf' : '-inf';
    return v;
  });
}

function bytesOf(out: OrtOutput): Buffer {
  if (!Array.isArray(out.data)) return Buffer.from(out.data, 'base64');
  return Buffer.concat(
    out.data.map((s) => {
      const b = Buffer.from(s);
      const len = Buffer.alloc(4);
      len.writeUInt32LE(b.length);
      return Buffer.concat([len, b]);
    }),
  );
}

/** JSON text with bigints written exactly. */
const rawJSON = (JSON as unknown as { rawJSON: (text: string) => unknown }).rawJSON;
const exactStringify = (body: unknown): string => JSON.stringify(body, (_k, v: unknown) => (typeof v === 'bigint' ? rawJSON(v.toString()) : v));
/** JSON parsed with integers past 2^53 as bigints, from their source text. */
const exactParse = (text: string): unknown =>
  JSON.parse(text, (_k, v: unknown, context?: { source?: string }) =>
    typeof v === 'number' && !Number.isSafeInteger(v) && context?.source !== undefined && /^-?\d+$/.test(context.source) ? BigInt(context.source) : v,
  );

async function inferJson(url: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: exactStringify(body) });
  return { status: res.status, body: exactParse(await res.text()) as Record<string, unknown> };
}

/** A request in the binary tensor data extension, asking for binary outputs; the answer split into its JSON and bytes. */
async function inferBinary(url: string, header: unknown, data: Buffer): Promise<{ status: number; json: Record<string, unknown>; binary: Buffer }> {
  const head = Buffer.from(JSON.stringify(header));
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(head.length) }, body: Buffer.concat([head, data]) });
  const all = Buffer.from(await res.arrayBuffer());
  const length = Number(res.headers.get('inference-header-content-length') ?? all.length);
  return { status: res.status, json: JSON.parse(all.subarray(0, length).toString()) as Record<string, unknown>, binary: all.subarray(length) };
}

let dir: string;
let r: ReplicaProcess;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-datatypes-'));
  for (const c of CASES) writeModel(dir, `identity-${c.type}`, identityModel(c.type));
  writeModel(dir, 'identity-float16', identityModel('float16'));
  writeModel(dir, 'cast-float32-float16', castModel('float32', 'float16'));
  writeModel(dir, 'identity-bfloat16', identityModel('bfloat16'));
  writeModel(dir, 'cast-float32-bfloat16', castModel('float32', 'bfloat16'));
  writeModel(dir, 'cast-bfloat16-float32', castModel('bfloat16', 'float32'));
  writeModel(dir, 'pass-through-bfloat16', passThroughModel('bfloat16'));
  writeModel(dir, 'string-output', stringOutputModel());
  writeModel(dir, 'sequence-output', sequenceOutputModel());
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '4'], env: {} });
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe.each(CASES)('datatype $datatype', (c) => {
  const id = `identity-${c.type}`;
  const model = (): string => join(dir, id, 'model.onnx');
  const answerHere = async (): Promise<OrtOutput> => (await runHere(model(), c.type, c.raw(c.values), [1, 3]))['y']!;

  it('answers JSON as onnxruntime does, exactly', async () => {
    const a = await inferJson(`${r.url}/v2/models/${id}/infer`, { inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3], data: c.values }] });
    expect(a.status).toBe(200);
    const want = await answerHere();
    expect(a.body['outputs']).toEqual([{ name: 'y', datatype: c.datatype, shape: want.dims, data: expectedJson(c.datatype, want) }]);
  });

  it('answers binary data as onnxruntime does, byte for byte', async () => {
    const want = await answerHere();
    const raw = c.raw(c.values);
    const input = Array.isArray(raw) ? bytesOf({ ...want, data: raw }) : raw;
    const a = await inferBinary(
      `${r.url}/v2/models/${id}/infer`,
      { inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3], parameters: { binary_data_size: input.length } }], parameters: { binary_data_output: true } },
      input,
    );
    expect(a.status).toBe(200);
    expect(a.json['outputs']).toEqual([{ name: 'y', datatype: c.datatype, shape: [1, 3], parameters: { binary_data_size: input.length } }]);
    expect(a.binary.equals(bytesOf(want))).toBe(true);
  });
});

describe('FP16', () => {
  const values = [1.5, 65504, 'inf'];
  it('answers as onnxruntime casts float32 to float16, in JSON and binary', async () => {
    const want = (await runHere(join(dir, 'cast-float32-float16', 'model.onnx'), 'float32', bytes(Float32Array.from(values.map(asNumber))), [1, 3]))['y']!;
    const json = await inferJson(`${r.url}/v2/models/identity-float16/infer`, { inputs: [{ name: 'x', datatype: 'FP16', shape: [1, 3], data: values }] });
    expect(json.status).toBe(200);
    expect(json.body['outputs']).toEqual([{ name: 'y', datatype: 'FP16', shape: [1, 3], data: expectedJson('FP16', want) }]);
    const cast = await inferJson(`${r.url}/v2/models/cast-float32-float16/infer`, { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], data: values }] });
    expect(cast.body['outputs']).toEqual(json.body['outputs']);
    const bits = bytesOf(want);
    const binary = await inferBinary(
      `${r.url}/v2/models/identity-float16/infer`,
      { inputs: [{ name: 'x', datatype: 'FP16', shape: [1, 3], parameters: { binary_data_size: 6 } }], outputs: [{ name: 'y', parameters: { binary_data: true } }] },
      bits,
    );
    expect(binary.status).toBe(200);
    expect(binary.binary.equals(bits)).toBe(true);
  });
});

describe('outputs the replica cannot answer', () => {
  it('serves a string output beside a numeric one, and either alone', async () => {
    const x = [1.5, 2, -3];
    const want = await runHere(join(dir, 'string-output', 'model.onnx'), 'float32', bytes(Float32Array.from(x)), [1, 3]);
    const all = await inferJson(`${r.url}/v2/models/string-output/infer`, { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], data: x }] });
    expect(all.status).toBe(200);
    expect(all.body['outputs']).toEqual([
      { name: 'y', datatype: 'FP32', shape: [1, 3], data: x },
      { name: 'label', datatype: 'BYTES', shape: [1, 3], data: want['label']!.data },
    ]);
    const only = await inferJson(`${r.url}/v2/models/string-output/infer`, { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], data: x }], outputs: [{ name: 'y' }] });
    expect(only.body['outputs']).toEqual([{ name: 'y', datatype: 'FP32', shape: [1, 3], data: x }]);
  });

  it('serves the tensor outputs of a model with a sequence output and names the one it cannot', async () => {
    const meta = (await (await fetch(`${r.url}/v2/models/sequence-output`)).json()) as Record<string, unknown>;
    expect(meta['outputs']).toEqual([{ name: 'y', datatype: 'FP32', shape: [-1, 3] }]);
    expect(meta['unserved_outputs']).toEqual([{ name: 'seq', reason: expect.stringMatching(/not a tensor/) }]);
    const x = [1, 2, 3];
    const ok = await inferJson(`${r.url}/v2/models/sequence-output/infer`, { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], data: x }] });
    expect(ok.body['outputs']).toEqual([{ name: 'y', datatype: 'FP32', shape: [1, 3], data: x }]);
    const asked = await inferJson(`${r.url}/v2/models/sequence-output/infer`, { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], data: x }], outputs: [{ name: 'seq' }] });
    expect(asked.status).toBe(400);
    expect(asked.body).toMatchObject({ error: 'input_mismatch', message: expect.stringMatching(/output "seq" is not served: .*not a tensor/) });
  });
});

/**
 * bfloat16 at a graph's edges, which onnxruntime-node cannot open and the replica serves by
 * widening them to float32 (replica/onnx/bf16-edges.ts). No runtime here can give a reference answer,
 * so the expected bits are computed: bfloat16 is the top half of a float32, rounded to nearest even.
 */
describe('BF16 at the edges of a graph', () => {
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  /** The bfloat16 nearest `v` as a float32 (ties to even), as its bit pattern. */
  const bf16Nearest = (v: number): number => {
    f32[0] = v;
    const bits = u32[0] as number;
    const low = bits & 0xffff;
    const high = bits >>> 16;
    return low > 0x8000 || (low === 0x8000 && (high & 1) === 1) ? high + 1 : high;
  };
  const bf16Value = (bits: number): number => {
    u32[0] = bits * 0x10000;
    return f32[0] as number;
  };
  // 1 + 2^-8 and 1 + 3·2^-8 are ties: to 1 (even) and to 1 + 2^-6 (even); 1e-40 is subnormal.
  const values = [1.5, -3.140625, 1.00390625, 1.01171875, 3e38, 1e-40];
  // -0, ±infinity, the smallest subnormal, the smallest normal, the largest finite, quiet NaNs of either sign, -1.
  const bits = Uint16Array.from([0x8000, 0x7f80, 0xff80, 0x0001, 0x0080, 0x7f7f, 0x7fc0, 0xffc0, 0xbf80]);

  it('keeps BF16 in the model metadata', async () => {
    const meta = (await (await fetch(`${r.url}/v2/models/identity-bfloat16`)).json()) as Record<string, unknown>;
    expect(meta['inputs']).toEqual([{ name: 'x', datatype: 'BF16', shape: [-1, 3] }]);
    expect(meta['outputs']).toEqual([{ name: 'y', datatype: 'BF16', shape: [-1, 3] }]);
  });

  it('serves a BF16 input and output in JSON, rounded to nearest even', async () => {
    const a = await inferJson(`${r.url}/v2/models/identity-bfloat16/infer`, { inputs: [{ name: 'x', datatype: 'BF16', shape: [2, 3], data: values }] });
    expect(a.status).toBe(200);
    expect(a.body['outputs']).toEqual([{ name: 'y', datatype: 'BF16', shape: [2, 3], data: values.map((v) => bf16Value(bf16Nearest(v))) }]);
  });

  it('serves a BF16 input and output in binary, bit for bit', async () => {
    const input = bytes(bits);
    const a = await inferBinary(
      `${r.url}/v2/models/identity-bfloat16/infer`,
      { inputs: [{ name: 'x', datatype: 'BF16', shape: [3, 3], parameters: { binary_data_size: input.length } }], parameters: { binary_data_output: true } },
      input,
    );
    expect(a.status).toBe(200);
    expect(a.json['outputs']).toEqual([{ name: 'y', datatype: 'BF16', shape: [3, 3], parameters: { binary_data_size: input.length } }]);
    expect([...new Uint16Array(new Uint8Array(a.binary).buffer)].map((b) => b.toString(16))).toEqual([...bits].map((b) => b.toString(16)));
  });

  it('serves a BF16 output the graph computes from FP32, as it rounds', async () => {
    const a = await inferBinary(
      `${r.url}/v2/models/cast-float32-bfloat16/infer`,
      { inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 3], parameters: { binary_data_size: 24 } }], parameters: { binary_data_output: true } },
      bytes(Float32Array.from(values)),
    );
    expect(a.status).toBe(200);
    expect(a.json['outputs']).toEqual([{ name: 'y', datatype: 'BF16', shape: [2, 3], parameters: { binary_data_size: 12 } }]);
    expect([...new Uint16Array(new Uint8Array(a.binary).buffer)]).toEqual(values.map(bf16Nearest));
  });

  it('serves a BF16 input the graph widens to FP32, exactly', async () => {
    const a = await inferBinary(
      `${r.url}/v2/models/cast-bfloat16-float32/infer`,
      { inputs: [{ name: 'x', datatype: 'BF16', shape: [3, 3], parameters: { binary_data_size: 18 } }], parameters: { binary_data_output: true } },
      bytes(bits),
    );
    expect(a.status).toBe(200);
    expect(a.json['outputs']).toEqual([{ name: 'y', datatype: 'FP32', shape: [3, 3], parameters: { binary_data_size: 36 } }]);
    expect([...new Uint32Array(new Uint8Array(a.binary).buffer)]).toEqual([...bits].map((b) => b * 0x10000));
  });

  it('refuses, saying why, a BF16 output that no node computes', async () => {
    const a = await inferJson(`${r.url}/v2/models/pass-through-bfloat16/infer`, { inputs: [{ name: 'x', datatype: 'BF16', shape: [1, 3], data: [1, 2, 3] }] });
    expect(a.status).toBe(422);
    expect(a.body).toMatchObject({ error: 'model_load_failed', message: expect.stringMatching(/cannot widen this one to float32: output "x" is not computed by a node/) });
  });
});
