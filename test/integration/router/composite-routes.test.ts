import { expect, jest } from '@jest/globals';
import { rm, writeFile } from 'node:fs/promises';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { eventually } from '../../../harness/eventually.js';
import { doublingModel, ensembleRoute as ensemble, linear, linearModel, MEMBER_B, MEMBER_W, sequenceRoute as sequence } from '../../helpers/composite-models.js';
import { writeModel } from '../../helpers/datatype-models.js';
import { RawClient } from '../../helpers/raw-http-client.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { post, type Answer } from '../replica/wine-fixtures.js';

jest.setTimeout(120_000);

/**
 * Ensembles and sequences (ModelRoutes from --routes-file) through a real router and two real
 * replicas running real ONNX models. Every expected answer is computed here from the members'
 * own answers, each asked alone through the router.
 */

const W = { ...MEMBER_W, slow: [1, 2, 3, 4, 5, 6] };
const B = { ...MEMBER_B, slow: [0.5, -0.5] };
const ROWS = [
  [1, 2, 3],
  [0.5, -1, 2],
  [3, 0, -1],
  [-2, 1, 1],
];
const x = { name: 'x', shape: [ROWS.length, 3], datatype: 'FP32', data: ROWS };
/**
 * The slow members wait this long before they run, using no CPU: their config.json makes the
 * replica hold each request for a batch that never fills (dynamic batching), far past every
 * deadline below.
 */
const SLOW_MS = 8000;
/** The ensembles' deadline: long enough for warm members on a loaded machine, far below SLOW_MS. */
const DEADLINE_MS = 2000;
/** The router's own request deadline (--request-timeout-ms), which bounds a whole sequence. */
const REQUEST_TIMEOUT_MS = 4000;
/** The router's wait for the next byte of a body, short so a stalled body is seen soon. */
const BODY_IDLE_MS = 1000;

const ROUTES = [
  ensemble('avg', ['a', 'b', 'c'], 'mean', { outputs: ['y'] }),
  ensemble('mid', ['a', 'b', 'c'], 'median', { outputs: ['y'] }),
  ensemble('poll', ['a', 'b', 'c'], 'vote', { outputs: ['label'] }),
  ensemble('pair', ['c', 'a'], 'vote', { outputs: ['label'] }),
  ensemble('fastest', ['slow-1', 'a'], 'first'),
  ensemble('two-of-three', ['a', 'b', 'nope'], 'mean', { quorum: 2, outputs: ['y'] }),
  ensemble('all-three', ['a', 'b', 'nope'], 'mean', { outputs: ['y'] }),
  ensemble('in-time', ['a', 'b', 'slow-2'], 'mean', { quorum: 2, deadlineMs: DEADLINE_MS, outputs: ['y'] }),
  ensemble('too-late', ['a', 'slow-3'], 'mean', { deadlineMs: DEADLINE_MS }),
  ensemble('unlike', ['a', 'double'], 'mean'),
  // Members named as a split route and as a version (id@v: the store's a/2/).
  { apiVersion: 'modelmux.io/v1alpha1', kind: 'ModelRoute', metadata: { name: 'a-split' }, spec: { deploymentRef: { name: 'comp' }, split: { backends: [{ model: 'a', weight: 1 }] } } },
  ensemble('mixed', ['a-split', 'a@2'], 'mean', { outputs: ['y'] }),
  sequence('pipeline', [{ model: 'double' }, { model: 'classify', inputs: { input_ids: 'ids' } }]),
  sequence('same-names', [{ model: 'double' }, { model: 'classify-ids' }]),
  sequence('typo', [{ model: 'double' }, { model: 'classify', inputs: { input_ids: 'tokens' } }]),
  sequence('stalls', [{ model: 'double' }, { model: 'slow-4', inputs: { x: 'ids' } }]),
];

let dir: string;
let rs: ReplicaProcess[];
let rt: RouterProcess;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'modelmux-composite-'));
  for (const id of ['a', 'b', 'c'] as const) writeModel(dir, id, linearModel(W[id], B[id]));
  writeModel(dir, join('a', '2'), linearModel(W.b, B.b));
  // One slow model per route: a request joins the batch an earlier (cancelled) one still waits in.
  for (const id of ['slow-1', 'slow-2', 'slow-3', 'slow-4']) {
    const slow = writeModel(dir, id, linearModel(W.slow, B.slow));
    await writeFile(join(slow, 'config.json'), JSON.stringify({ dynamicBatching: { maxBatchSize: 1024, batchWaitMs: SLOW_MS } }));
  }
  writeModel(dir, 'double', doublingModel());
  writeModel(dir, 'classify', linearModel(W.classify, B.classify, 'input_ids'));
  writeModel(dir, 'classify-ids', linearModel(W.classify, B.classify, 'ids'));
  const routesFile = join(dir, 'routes.yaml');
  await writeFile(routesFile, ROUTES.map((r) => JSON.stringify(r)).join('\n---\n'));
  rs = await Promise.all([0, 1].map(() => startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '16'] })));
  rt = await startRouter([
    '--routes',
    `/comp=${rs.map((r) => r.url).join(',')}`,
    '--routes-file',
    routesFile,
    '--poll-interval-ms',
    '200',
    '--request-timeout-ms',
    String(REQUEST_TIMEOUT_MS),
    '--body-idle-timeout-ms',
    String(BODY_IDLE_MS),
  ]);
});

afterAll(async () => {
  await rt?.stop(5000);
  await Promise.all((rs ?? []).map((r) => r.stop(5000)));
  await rm(dir, { recursive: true, force: true });
});

const infer = (model: string, body: unknown = { inputs: [x] }, headers: Record<string, string> = {}): Promise<Answer> => post(`${rt.url}/comp/v2/models/${model}/infer`, body, headers);

interface Tensor {
  name: string;
  datatype: string;
  shape: number[];
  data: unknown[];
}

function output(a: Answer, name: string): Tensor {
  const outputs = a.body.outputs as Tensor[] | undefined;
  const t = outputs?.find((o) => o.name === name);
  if (t === undefined) throw new Error(`no output ${name} in ${JSON.stringify(a.body)}`);
  return { ...t, data: t.data.flat(8) };
}

/** Each member's `name` output, asked alone through the router. */
async function alone(members: string[], name: string): Promise<number[][]> {
  const answers = await Promise.all(members.map((m) => infer(m)));
  for (const a of answers) expect(a.status).toBe(200);
  return answers.map((a) => output(a, name).data as number[]);
}

function columns(values: number[][]): number[][] {
  return (values[0] as number[]).map((_, i) => values.map((v) => v[i] as number));
}

function expectClose(actual: readonly unknown[], wanted: readonly number[]): void {
  expect(actual).toHaveLength(wanted.length);
  wanted.forEach((w, i) => expect(actual[i]).toBeCloseTo(w, 5));
}

describe('ensembles', () => {
  it('mean: the element-wise mean of the members, which are named in the answer', async () => {
    const ys = await alone(['a', 'b', 'c'], 'y');
    // The members are real models: their answers differ, and match what their weights give.
    expectClose(ys[0] as number[], linear(ROWS, W.a, B.a).flat());
    const a = await infer('avg');
    expect(a.status).toBe(200);
    expect(a.headers.get('x-modelmux-members')).toBe('a,b,c');
    expect(a.body.model_name).toBe('avg');
    expect(a.body.parameters).toEqual({ members: ['a', 'b', 'c'] });
    const y = output(a, 'y');
    expect(y.shape).toEqual([ROWS.length, 2]);
    expect(y.datatype).toBe('FP32');
    expectClose(
      y.data,
      columns(ys).map((c) => c.reduce((s, v) => s + v, 0) / c.length),
    );
    expect((a.body.outputs as Tensor[]).map((o) => o.name)).toEqual(['y']);
  });

  it('median: the middle member per element', async () => {
    const ys = await alone(['a', 'b', 'c'], 'y');
    const a = await infer('mid');
    expect(a.status).toBe(200);
    expectClose(
      output(a, 'y').data,
      columns(ys).map((c) => [...c].sort((p, q) => p - q)[1] as number),
    );
  });

  it.each([
    ['poll', ['a', 'b', 'c']],
    ['pair', ['c', 'a']],
  ])('vote (%s): the majority class per row, ties to the member listed first', async (route, members) => {
    const labels = await alone(members, 'label');
    const wanted = columns(labels).map((c) => {
      const count = (v: number): number => c.filter((u) => u === v).length;
      return c.reduce((best, v) => (count(v) > count(best) ? v : best), c[0] as number);
    });
    // The members disagree somewhere, so the vote decides something.
    expect(columns(labels).some((c) => new Set(c).size > 1)).toBe(true);
    const a = await infer(route);
    expect(a.status).toBe(200);
    const label = output(a, 'label');
    expect(label.datatype).toBe('INT64');
    expect(label.data).toEqual(wanted);
  });

  it('takes members named by a split route and by a version', async () => {
    const [ya, yb] = await alone(['a', 'b'], 'y');
    const a = await infer('mixed');
    expect(a.status).toBe(200);
    expect(a.headers.get('x-modelmux-members')).toBe('a-split,a@2');
    // a@2 holds b's weights.
    expectClose(
      output(a, 'y').data,
      (ya as number[]).map((v, i) => (v + (yb as number[])[i]!) / 2),
    );
  });

  it('works through the Ray and SageMaker request forms, the route name as the model id', async () => {
    const v2 = output(await infer('avg'), 'y').data;
    const ray = await post(`${rt.url}/comp/`, { inputs: [x] }, { serve_multiplexed_model_id: 'avg' });
    expect(ray.status).toBe(200);
    expect(output(ray, 'y').data).toEqual(v2);
    const sagemaker = await post(`${rt.url}/comp/invocations`, { inputs: [x] }, { 'x-amzn-sagemaker-target-model': 'avg' });
    expect(sagemaker.status).toBe(200);
    expect(output(sagemaker, 'y').data).toEqual(v2);
  });

  it('first: answers with the member that finished first and cancels the other', async () => {
    const before = await rt.metrics();
    const started = Date.now();
    const a = await infer('fastest');
    const took = Date.now() - started;
    expect(a.status).toBe(200);
    expect(a.headers.get('x-modelmux-members')).toBe('a');
    expect(a.body.parameters).toEqual({ members: ['a'] });
    expectClose(output(a, 'y').data, linear(ROWS, W.a, B.a).flat());
    expect(took).toBeLessThan(SLOW_MS);
    const after = await rt.metrics();
    const cancelled = 'modelmux_router_composite_member_requests_total{route="/comp",composite="fastest",member="slow-1",outcome="cancelled"}';
    expect((after.get(cancelled) ?? 0) - (before.get(cancelled) ?? 0)).toBe(1);
    // The slow member's own request was given up long before its answer, under the client's request id.
    const id = a.headers.get('x-request-id');
    await eventually(() => expect(rt.logLines()).toContainEqual(expect.objectContaining({ msg: 'request', requestId: id, model: 'slow-1', error: 'client_closed' })), 10_000, 25);
  });

  it('a missing member is tolerated within the quorum and named when the quorum fails', async () => {
    const ys = await alone(['a', 'b'], 'y');
    const ok = await infer('two-of-three');
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-modelmux-members')).toBe('a,b');
    expectClose(
      output(ok, 'y').data,
      columns(ys).map((c) => (c[0] as number) / 2 + (c[1] as number) / 2),
    );
    const failed = await infer('all-three');
    expect(failed.status).toBe(502);
    expect(failed.body.error).toBe('ensemble_quorum');
    expect(failed.body.message).toMatch(/1 of 3 members failed, the quorum is 3; failed: nope \(model_not_found: /);
  });

  it('a request every member refuses gets their error, not the route', async () => {
    const a = await infer('avg', { inputs: [{ ...x, name: 'nope' }] });
    expect(a.status).toBe(400);
    expect(a.body.error).toBe('input_mismatch');
  });

  it('members that answer unlike outputs are refused with a clear error', async () => {
    const a = await infer('unlike');
    expect(a.status).toBe(502);
    expect(a.body.error).toBe('ensemble_mismatch');
    expect(a.body.message).toMatch(/member double answered no output "y"/);
  });

  it('refuses row bodies, and binary data its inputs do not declare, with their codes', async () => {
    const binary = await infer('avg', { inputs: [{ name: 'x', shape: [1, 3], datatype: 'FP32', parameters: { binary_data_size: 12 } }] });
    expect(binary.status).toBe(400);
    expect(binary.body.error).toBe('invalid_request');
    expect(binary.body.message).toMatch(/declares 12 bytes of binary data beyond the end of the body/);
    const rows = await infer('avg', [[1, 2, 3]]);
    expect(rows.status).toBe(400);
    expect(rows.body.error).toBe('invalid_request');
  });

  it('answers a body that stalls 408 request_timeout after the body idle timeout, and closes the connection', async () => {
    const c = new RawClient(rt.port).send(`POST /comp/v2/models/avg/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"inputs":`);
    const sent = Date.now();
    await c.until((r) => r.closed, BODY_IDLE_MS + 5000);
    expect(Date.now() - sent).toBeGreaterThanOrEqual(BODY_IDLE_MS - 100);
    expect(c.text).toMatch(/^HTTP\/1\.1 408 [\s\S]*connection: close\r\n/i);
    expect(c.json()).toMatchObject({ error: 'request_timeout', message: expect.stringContaining('no byte of the body') });
  });

  it("counts a chunked body in the router's byte budget while it arrives, and lets go of it when the client leaves", async () => {
    const c = new RawClient(rt.port).send(`POST /comp/v2/models/avg/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
    const part = Buffer.alloc(1 << 20, ' ');
    c.send(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]));
    await eventually(async () => expect((await rt.metrics()).get('modelmux_router_buffered_bytes') ?? 0).toBeGreaterThanOrEqual(part.length), 10_000, 25);
    c.socket.destroy();
    await eventually(async () => expect((await rt.metrics()).get('modelmux_router_buffered_bytes')).toBe(0), 10_000, 25);
  });

  it('the deadline: answers with the members in time when they meet the quorum, else ensemble_deadline', async () => {
    await alone(['a', 'b'], 'y'); // warm
    const ys = await alone(['a', 'b'], 'y');
    const started = Date.now();
    const ok = await infer('in-time');
    const took = Date.now() - started;
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-modelmux-members')).toBe('a,b');
    expectClose(
      output(ok, 'y').data,
      columns(ys).map((c) => (c[0] as number) / 2 + (c[1] as number) / 2),
    );
    expect(took).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
    const late = await infer('too-late');
    expect(late.status).toBe(504);
    expect(late.body.error).toBe('ensemble_deadline');
    expect(late.body.message).toMatch(new RegExp(`^the ensemble deadline of ${DEADLINE_MS} ms passed: 1 of 2 members answered, the quorum is 2; no answer from slow-3`));
    const m = await rt.metrics();
    expect(m.get('modelmux_router_composite_member_requests_total{route="/comp",composite="too-late",member="slow-3",outcome="deadline"}')).toBe(1);
  });
});

describe('sequences', () => {
  it("feeds the first step's named output to the second step's input", async () => {
    const first = await infer('double');
    expect(first.status).toBe(200);
    const ids = output(first, 'ids');
    expectClose(
      ids.data,
      ROWS.flat().map((v) => 2 * v),
    );
    const byHand = await infer('classify', { inputs: [{ name: 'input_ids', shape: ids.shape, datatype: ids.datatype, data: ids.data }] });
    expect(byHand.status).toBe(200);
    const a = await infer('pipeline', { id: 'req-7', inputs: [x] });
    expect(a.status).toBe(200);
    expect(a.body.id).toBe('req-7');
    expect(a.headers.get('x-modelmux-members')).toBe('double,classify');
    expect(output(a, 'y')).toEqual(output(byHand, 'y'));
    expect(output(a, 'label')).toEqual(output(byHand, 'label'));
  });

  it('passes unmapped tensors by name, and the request may ask for outputs of the last step', async () => {
    const a = await infer('same-names', { inputs: [x], outputs: [{ name: 'label' }] });
    expect(a.status).toBe(200);
    expect((a.body.outputs as Tensor[]).map((o) => o.name)).toEqual(['label']);
    const b = await infer('pipeline', { inputs: [x] });
    expect(output(a, 'label')).toEqual(output(b, 'label'));
  });

  it('names the step and the tensor when a mapping does not fit', async () => {
    const a = await infer('typo');
    expect(a.status).toBe(502);
    expect(a.body.error).toBe('sequence_mapping');
    expect(a.body.message).toBe('step 2 (classify): input "input_ids" (mapped from "tokens"): step 1 (double) answered no output "tokens" (outputs: ids) and the request has no input of that name');
  });

  it("answers a first step's refusal as the request's own error, naming the step", async () => {
    const a = await infer('pipeline', { inputs: [{ ...x, shape: [2, 6] }] });
    expect(a.status).toBe(400);
    expect(a.body.error).toBe('input_mismatch');
    expect(a.body.message).toMatch(/^step 1 \(double\): /);
  });

  it("ends at the request's own deadline, naming the step that was running", async () => {
    const started = Date.now();
    const a = await infer('stalls');
    expect(a.status).toBe(504);
    expect(a.body.error).toBe('timeout');
    expect(a.body.message).toBe(`the request deadline of ${REQUEST_TIMEOUT_MS} ms passed while step 2 (slow-4) ran`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
    const m = await rt.metrics();
    expect(m.get('modelmux_router_composite_member_requests_total{route="/comp",composite="stalls",member="double",outcome="ok"}')).toBe(1);
    expect(m.get('modelmux_router_composite_member_requests_total{route="/comp",composite="stalls",member="slow-4",outcome="deadline"}')).toBe(1);
  });

  it('answers metadata and readiness of composite routes from their members', async () => {
    const get = async (path: string): Promise<{ status: number; body: Record<string, unknown> }> => {
      const r = await fetch(`${rt.url}/comp/v2/models/${path}`);
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    const avg = await get('avg');
    expect(avg.status).toBe(200);
    expect(avg.body).toMatchObject({
      name: 'avg',
      platform: 'modelmux_ensemble',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }],
      outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 2] }],
    });
    const pipeline = await get('pipeline');
    expect(pipeline.status).toBe(200);
    expect(pipeline.body).toMatchObject({ name: 'pipeline', platform: 'modelmux_sequence', inputs: [{ name: 'x' }], outputs: [{ name: 'y' }, { name: 'label', datatype: 'INT64' }] });
    // A model's readiness is its replica's (loaded there): the router places the members' asks on holders.
    await eventually(async () => expect((await get('two-of-three/ready')).status).toBe(200), 10_000, 25);
    expect(await get('two-of-three/ready')).toEqual({ status: 200, body: { name: 'two-of-three', ready: true } });
    expect(await get('all-three/ready')).toEqual({ status: 503, body: { name: 'all-three', ready: false } });
  });

  it('holds no request or answer bytes once the composite requests are over, cancelled members included', async () => {
    const m = await rt.metrics();
    expect(m.get('modelmux_router_buffered_bytes')).toBe(0);
  });
});
