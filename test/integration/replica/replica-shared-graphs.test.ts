import { jest } from '@jest/globals';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { encodeOnnxModel } from '../../../common/onnx-writer.js';
import { wineForward, wineModelBytes, wineWeights } from '../../../common/wine-model.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { expectClose, get, post, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(90_000);

/** Wide enough that the weights of two models could not be mistaken for each other's. */
const HIDDEN = 3000;
const rows = wineRows(3);
const want = (id: string, hidden = HIDDEN): number[] => wineForward(wineWeights(id, hidden), rows);

let dir: string;
const replicas: ReplicaProcess[] = [];

async function replica(...args: string[]): Promise<ReplicaProcess> {
  const r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, ...args] });
  replicas.push(r);
  return r;
}

async function infer(r: ReplicaProcess, id: string): Promise<number[]> {
  const a = await post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));
  expect(a.status).toBe(200);
  return v2Outputs(a);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-shared-graphs-'));
  // An input named like an Object.prototype member: inputs are told from weights by own keys only.
  const relu = encodeOnnxModel({
    name: 'relu',
    opset: 13,
    inputs: [{ name: 'constructor', shape: [1, 2] }],
    outputs: [{ name: 'y', shape: [1, 2] }],
    initializers: [],
    nodes: [{ opType: 'Relu', inputs: ['constructor'], outputs: ['y'] }],
  });
  const files: [string, Uint8Array][] = [
    ['a', wineModelBytes('a', HIDDEN)],
    ['b', wineModelBytes('b', HIDDEN)],
    ['c', wineModelBytes('c', HIDDEN)],
    ['wide', wineModelBytes('wide', HIDDEN + 1)],
    ['relu', relu],
    ['garbage', new TextEncoder().encode('not an onnx model')],
  ];
  for (const [id, bytes] of files) {
    await mkdir(join(dir, id));
    await writeFile(join(dir, id, 'model.onnx'), bytes);
  }
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  await rm(dir, { recursive: true, force: true });
});

describe('replica sharing one session among models of one graph', () => {
  it('serves each model with its own weights from one shared session, and hides the weights from clients', async () => {
    // LRU, so that which models stay loaded below depends on the order of requests alone.
    const r = await replica('--max-models', '2', '--cache-policy', 'lru');
    expectClose(await infer(r, 'a'), want('a'));
    expectClose(await infer(r, 'b'), want('b'));
    expect(want('a')).not.toEqual(want('b'));
    const m = await r.metrics();
    expect(m.get('modelmux_replica_model_opens_total{kind="shared_graph"}')).toBe(2);
    expect(m.get('modelmux_replica_shared_graphs')).toBe(1);
    const meta = await get(`${r.url}/v2/models/a`);
    expect(meta.body.inputs).toEqual([{ name: 'features', datatype: 'FP32', shape: [-1, 11] }]);

    // Loads and evictions in turn reuse the buffers weights live in: every answer stays the model's own.
    for (let round = 0; round < 3; round++) for (const id of ['a', 'b', 'c']) expectClose(await infer(r, id), want(id));
    // Another shape gets a session of its own; models of the first shape keep theirs.
    expectClose(await infer(r, 'wide'), want('wide', HIDDEN + 1));
    expect((await r.metrics()).get('modelmux_replica_shared_graphs')).toBe(2);
    expectClose(await infer(r, 'c'), want('c'));
  });

  it('opens a model with no weights to share with a session of its own, and refuses a broken file without keeping it', async () => {
    const r = await replica('--max-models', '2');
    const relu = await post(`${r.url}/v2/models/relu/infer`, { inputs: [{ name: 'constructor', shape: [1, 2], datatype: 'FP32', data: [-1, 2] }] });
    expect(relu.status).toBe(200);
    expect(v2Outputs(relu)).toEqual([0, 2]);
    expect((await r.metrics()).get('modelmux_replica_model_opens_total{kind="own_session"}')).toBe(1);
    const broken = await post(`${r.url}/v2/models/garbage/infer`, v2Body(rows));
    expect(broken.status).toBe(422);
    expect(broken.body.error).toBe('model_load_failed');
    expect((await get(`${r.url}/models`)).body.loaded).toEqual(['relu']);
    expect((await r.metrics()).get('modelmux_replica_shared_graphs')).toBe(0);
  });

  it('gives every model its own session with --share-graphs false', async () => {
    const r = await replica('--share-graphs', 'false');
    expectClose(await infer(r, 'a'), want('a'));
    expectClose(await infer(r, 'b'), want('b'));
    const m = await r.metrics();
    expect(m.get('modelmux_replica_model_opens_total{kind="own_session"}')).toBe(2);
    expect(m.get('modelmux_replica_model_opens_total{kind="shared_graph"}') ?? 0).toBe(0);
    expect(m.get('modelmux_replica_shared_graphs')).toBe(0);
  });

  it('keeps a popular model loaded when a rare one is asked for (the default frequency policy)', async () => {
    const r = await replica('--max-models', '1');
    for (let i = 0; i < 3; i++) expectClose(await infer(r, 'a'), want('a'));
    expectClose(await infer(r, 'b'), want('b'));
    expect((await get(`${r.url}/models`)).body.loaded).toEqual(['a']);
    const m = await r.metrics();
    expect(m.get('modelmux_replica_model_evictions_total{reason="not_admitted"}')).toBe(1);
    expect(m.get('modelmux_replica_model_evictions_total{reason="capacity"}') ?? 0).toBe(0);
    const hit = await post(`${r.url}/v2/models/a/infer`, v2Body(rows));
    expect(hit.headers.get('x-modelmux-cache')).toBe('hit');
  });
});
