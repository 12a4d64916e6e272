import { expect, jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ModelMetadataResponse, TensorMetadata } from '../../../common/grpc/inference-service.js';
import { parseJsonBody } from '../../../common/json-body.js';
import type { OnnxElemType } from '../../../common/onnx-writer.js';
import { stringify } from '../../../router/composite/composite-body.js';
import { doublingModel, ensembleRoute as ensemble, linearModel, MEMBER_B, MEMBER_W, sequenceRoute as sequence } from '../../helpers/composite-models.js';
import { identityModel, writeModel } from '../../helpers/datatype-models.js';
import { inferenceClientFor } from '../../helpers/grpc-client.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { post } from '../replica/wine-fixtures.js';

jest.setTimeout(300_000);

/**
 * Ensembles and sequences over gRPC (typed and raw contents) and over HTTP with the binary tensor
 * data extension, through Triton's own clients (test/fixtures/triton_composite_client.py):
 * tritonclient.grpc (raw contents), the V2 service's stub (typed contents) and tritonclient.http
 * (binary data). A real router and two real replicas run real ONNX models; each composite answer
 * is compared with its members asked alone through the same client.
 */

const W = MEMBER_W;
const B = MEMBER_B;
const x = {
  name: 'x',
  datatype: 'FP32',
  shape: [4, 3],
  data: [1, 2, 3, 0.5, -1, 2, 3, 0, -1, -2, 1, 1],
};

/** One tensor of each datatype the Triton clients send, values at the edges of their ranges, each exact in its type. */
const DATATYPES: { datatype: string; type: OnnxElemType; data: unknown[] }[] = [
  { datatype: 'BOOL', type: 'bool', data: [true, false, true] },
  { datatype: 'UINT8', type: 'uint8', data: [0, 7, 255] },
  { datatype: 'UINT16', type: 'uint16', data: [0, 7, 65535] },
  { datatype: 'UINT32', type: 'uint32', data: [0, 7, 4294967295] },
  { datatype: 'UINT64', type: 'uint64', data: [0n, 9007199254740993n, 18446744073709551615n] },
  { datatype: 'INT8', type: 'int8', data: [-128, 0, 127] },
  { datatype: 'INT16', type: 'int16', data: [-32768, 1, 32767] },
  { datatype: 'INT32', type: 'int32', data: [-2147483648, 1, 2147483647] },
  { datatype: 'INT64', type: 'int64', data: [-9223372036854775808n, -9007199254740993n, 9223372036854775807n] },
  { datatype: 'FP16', type: 'float16', data: [1.5, -65504, 'inf'] },
  { datatype: 'FP32', type: 'float32', data: [1.5, 'inf', 'nan'] },
  { datatype: 'FP64', type: 'float64', data: [0.1, '-inf', 1e300] },
  { datatype: 'BYTES', type: 'string', data: ['a', 'héllo', ''] },
];

const ROUTES = [
  ensemble('avg', ['a', 'b', 'c'], 'mean', { outputs: ['y'] }),
  ensemble('poll', ['a', 'b', 'c'], 'vote', { outputs: ['label'] }),
  ensemble('all-three', ['a', 'b', 'nope'], 'mean', { outputs: ['y'] }),
  {
    apiVersion: 'modelmux.io/v1alpha1',
    kind: 'ModelRoute',
    metadata: { name: 'pipeline' },
    spec: { deploymentRef: { name: 'comp' }, sequence: { steps: [{ model: 'double' }, { model: 'classify', inputs: { input_ids: 'ids' } }] } },
  },
  // Two steps that each hand their input back: the answer is the client's tensor, exactly, having been written as a member's JSON request twice.
  ...DATATYPES.map((d) => sequence(`pass-${d.type}`, [{ model: `identity-${d.type}` }, { model: `identity-${d.type}`, inputs: { x: 'y' } }])),
];

type Via = 'grpc-raw' | 'grpc-typed' | 'http-binary';
const VIAS: Via[] = ['grpc-raw', 'grpc-typed', 'http-binary'];

interface Tensor {
  datatype: string;
  shape: number[];
  data: unknown[];
}
interface Answer {
  outputs?: Record<string, Tensor>;
  form?: string;
  members?: string | null;
  error?: { status: string; message: string; code: string | null };
}
interface Call {
  id: string;
  via: Via;
  model: string;
  inputs: { name: string; datatype: string; shape: number[]; data: unknown[] }[];
  outputs: string[];
}

let dir: string;
let rs: ReplicaProcess[];
let rt: RouterProcess;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'modelmux-composite-protocols-'));
  for (const id of ['a', 'b', 'c'] as const) writeModel(dir, id, linearModel(W[id], B[id]));
  writeModel(dir, 'double', doublingModel());
  writeModel(dir, 'classify', linearModel(W.classify, B.classify, 'input_ids'));
  for (const d of DATATYPES) writeModel(dir, `identity-${d.type}`, identityModel(d.type));
  const routesFile = join(dir, 'routes.yaml');
  await writeFile(routesFile, ROUTES.map((r) => JSON.stringify(r)).join('\n---\n'));
  rs = await Promise.all([0, 1].map(() => startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '32'] })));
  // Members asked alone over gRPC are forwarded to the replicas' gRPC ports.
  const urls = rs.map((r) => `${r.url}?grpc-port=${(r.grpcAddress ?? '').split(':')[1]}`);
  rt = await startRouter(['--routes', `/comp=${urls.join(',')}`, '--routes-file', routesFile, '--poll-interval-ms', '200']);
});

afterAll(async () => {
  await rt?.stop(5000);
  await Promise.all((rs ?? []).map((r) => r.stop(5000)));
  await rm(dir, { recursive: true, force: true });
});

const run = (file: string, args: string[], stdin: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = execFile(file, args, { maxBuffer: 64 * 1024 * 1024, timeout: 240_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
    child.stdin?.end(stdin);
  });

/** The venv's bin folder, installed (once per machine) by test/tools/install-model-corpus.sh: it holds tritonclient[http,grpc]. */
async function venvBin(): Promise<string> {
  const bin = (await run('bash', [join(process.cwd(), 'test/tools/install-model-corpus.sh')], '')).trim().split('\n').pop();
  if (!bin) throw new Error('install-model-corpus.sh printed no path');
  return bin;
}

/** Runs `calls` through the Triton clients; answers by call id, integers past 2^53 kept exact. */
async function triton(calls: Call[]): Promise<Record<string, Answer>> {
  const bin = await venvBin();
  const host = rt.url.replace(/^http:\/\//, '');
  const out = await run(join(bin, 'python'), [join(process.cwd(), 'test/fixtures/triton_composite_client.py'), `${host}/comp`, rt.grpcAddress as string], stringify(calls));
  return parseJsonBody(Buffer.from(out)) as Record<string, Answer>;
}

/** Values as strings, so 7, 7n and 7.0 read alike, and bigints past 2^53 compare exactly. */
const exact = (data: readonly unknown[]): string[] => data.map((v) => String(v));

function outputOf(a: Answer | undefined, name: string): Tensor {
  const t = a?.outputs?.[name];
  if (t === undefined) throw new Error(`no output ${name} in ${JSON.stringify(a)}`);
  return t;
}

const FORM: Record<Via, string> = { 'grpc-raw': 'raw', 'grpc-typed': 'typed', 'http-binary': 'binary' };

let answers: Record<string, Answer>;
let ids: Tensor;

beforeAll(async () => {
  // The second step's input, as the first step answers it (JSON, exact for FP32).
  const first = await post(`${rt.url}/comp/v2/models/double/infer`, { inputs: [x] }, {});
  expect(first.status).toBe(200);
  const out = (first.body.outputs as (Tensor & { name: string })[])[0] as Tensor & { name: string };
  ids = { datatype: out.datatype, shape: out.shape, data: out.data.flat(4) };
  const calls: Call[] = [];
  for (const via of VIAS) {
    for (const model of ['a', 'b', 'c', 'avg', 'poll'])
      calls.push({ id: `${via}:${model}`, via, model, inputs: [x], outputs: model === 'poll' ? ['label'] : model === 'avg' ? ['y'] : ['y', 'label'] });
    calls.push({ id: `${via}:pipeline`, via, model: 'pipeline', inputs: [x], outputs: ['y', 'label'] });
    calls.push({ id: `${via}:classify`, via, model: 'classify', inputs: [{ name: 'input_ids', ...ids }], outputs: ['y', 'label'] });
    for (const d of DATATYPES) {
      // FP16 has no typed contents field: a typed call cannot carry it.
      if (via === 'grpc-typed' && d.datatype === 'FP16') continue;
      const input = { name: 'x', datatype: d.datatype, shape: [1, 3], data: d.data };
      calls.push({ id: `${via}:pass-${d.type}`, via, model: `pass-${d.type}`, inputs: [input], outputs: ['y'] });
      calls.push({ id: `${via}:identity-${d.type}`, via, model: `identity-${d.type}`, inputs: [input], outputs: ['y'] });
    }
  }
  calls.push({ id: 'grpc-typed:all-three', via: 'grpc-typed', model: 'all-three', inputs: [x], outputs: ['y'] });
  calls.push({ id: 'grpc-typed:pipeline-refused', via: 'grpc-typed', model: 'pipeline', inputs: [{ ...x, shape: [2, 6] }], outputs: [] });
  calls.push({ id: 'grpc-raw:all-three', via: 'grpc-raw', model: 'all-three', inputs: [x], outputs: ['y'] });
  calls.push({ id: 'http-binary:all-three', via: 'http-binary', model: 'all-three', inputs: [x], outputs: ['y'] });
  answers = await triton(calls);
});

describe.each(VIAS)('composite routes through %s', (via) => {
  const answer = (model: string): Answer => answers[`${via}:${model}`] ?? {};

  it("answers an ensemble's mean and vote from its members asked alone, in the client's form, naming the members", () => {
    const avg = answer('avg');
    expect([avg.form, avg.members]).toEqual([FORM[via], 'a,b,c']);
    const ys = ['a', 'b', 'c'].map((m) => outputOf(answer(m), 'y').data as number[]);
    const y = outputOf(avg, 'y');
    expect([y.datatype, y.shape]).toEqual(['FP32', [4, 2]]);
    y.data.forEach((v, i) => expect(v).toBeCloseTo(((ys[0]?.[i] ?? 0) + (ys[1]?.[i] ?? 0) + (ys[2]?.[i] ?? 0)) / 3, 5));
    const labels = ['a', 'b', 'c'].map((m) => exact(outputOf(answer(m), 'label').data));
    const poll = outputOf(answer('poll'), 'label');
    expect(poll.datatype).toBe('INT64');
    // The most common label per row, the first member's on a tie.
    const voted = (labels[0] ?? []).map((_, i) => {
      const row = labels.map((l) => l[i] as string);
      return row.find((v) => row.filter((w) => w === v).length >= 2) ?? row[0];
    });
    expect(exact(poll.data)).toEqual(voted);
  });

  it("answers a sequence with its last step's outputs, exactly those of the steps asked one after the other", () => {
    const pipeline = answer('pipeline');
    expect([pipeline.form, pipeline.members]).toEqual([FORM[via], 'double,classify']);
    const classify = answer('classify');
    for (const name of ['y', 'label'])
      expect({ ...outputOf(pipeline, name), data: exact(outputOf(pipeline, name).data) }).toEqual({ ...outputOf(classify, name), data: exact(outputOf(classify, name).data) });
  });

  it.each(DATATYPES.filter((d) => via !== 'grpc-typed' || d.datatype !== 'FP16'))('hands a $datatype tensor through a sequence bit for bit, as its member answers it alone', (d) => {
    const passed = answer(`pass-${d.type}`);
    expect(passed.error).toBeUndefined();
    expect(passed.form).toBe(FORM[via]);
    const y = outputOf(passed, 'y');
    expect({ ...y, data: exact(y.data) }).toEqual({ datatype: d.datatype, shape: [1, 3], data: exact(d.data) });
    const alone = outputOf(answer(`identity-${d.type}`), 'y');
    expect({ ...alone, data: exact(alone.data) }).toEqual({ ...y, data: exact(y.data) });
  });

  it('fails as the HTTP form does when a member fails: the quorum names it', () => {
    const failed = answer('all-three');
    // tritonclient.http reads a failed answer's `error` as its message: modelmux's code.
    if (via === 'http-binary') return expect([failed.error?.status, failed.error?.message]).toEqual(['502', 'ensemble_quorum']);
    expect(failed.error?.message).toMatch(/1 of 3 members failed, the quorum is 3; failed: nope \(model_not_found: /);
    if (via === 'grpc-typed') expect([failed.error?.status, failed.error?.code]).toEqual(['UNAVAILABLE', 'ensemble_quorum']);
  });
});

it("answers a gRPC call whose first step refuses its input with that step's status and code, naming the step", () => {
  const refused = answers['grpc-typed:pipeline-refused'];
  expect([refused?.error?.status, refused?.error?.code]).toEqual(['INVALID_ARGUMENT', 'input_mismatch']);
  expect(refused?.error?.message).toMatch(/^step 1 \(double\): /);
});

it('counts gRPC composite calls in the router metrics by route, method and status', async () => {
  const m = await rt.metrics();
  expect(m.get('modelmux_router_grpc_requests_total{route="/comp",method="ModelInfer",code="OK"}')).toBeGreaterThan(0);
  expect(m.get('modelmux_router_grpc_requests_total{route="/comp",method="ModelInfer",code="UNAVAILABLE"}')).toBeGreaterThanOrEqual(1);
  expect(m.get('modelmux_router_composite_member_requests_total{route="/comp",composite="avg",member="a",outcome="ok"}')).toBe(3);
});

it('answers ModelMetadata and ModelReady of composite routes over gRPC with what HTTP answers', async () => {
  const client = inferenceClientFor(rt.grpcAddress as string);
  try {
    for (const name of ['avg', 'pipeline']) {
      const overHttp = await fetch(`${rt.url}/comp/v2/models/${name}`);
      const http = (await overHttp.json()) as { name: string; platform: string; inputs: unknown[]; outputs: unknown[] };
      const meta = await client.call<ModelMetadataResponse>('ModelMetadata', { name });
      if (!meta.ok) throw new Error(meta.details);
      // Shapes are int64 in the message: decimal strings as the client reads them.
      const numeric = (list: TensorMetadata[]): unknown[] => list.map((t) => ({ ...t, shape: t.shape.map(Number) }));
      expect({ ...meta.value, inputs: numeric(meta.value.inputs), outputs: numeric(meta.value.outputs) }).toMatchObject({
        name: http.name,
        platform: http.platform,
        inputs: http.inputs,
        outputs: http.outputs,
      });
      const ready = await client.call<{ ready: boolean }>('ModelReady', { name });
      expect(ready.ok ? ready.value : ready.details).toEqual({ ready: true });
    }
    // An ensemble whose member cannot load is not ready: its quorum is every member.
    const notReady = await client.call<{ ready: boolean }>('ModelReady', { name: 'all-three' });
    expect(notReady.ok ? notReady.value : notReady.details).toEqual({ ready: false });
  } finally {
    client.close();
  }
});
