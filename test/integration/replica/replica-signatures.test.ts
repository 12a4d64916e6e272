import { jest } from '@jest/globals';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { encodeOnnxModel } from '../../../common/onnx-writer.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { get, post } from './wine-fixtures.js';

jest.setTimeout(60_000);

/** s = a + b over two inputs with a dynamic dim 0. */
const adder = encodeOnnxModel({
  name: 'adder',
  opset: 13,
  inputs: [
    { name: 'a', shape: ['n', 2] },
    { name: 'b', shape: ['n', 2] },
  ],
  outputs: [{ name: 's', shape: ['n', 2] }],
  initializers: [],
  nodes: [{ opType: 'Add', inputs: ['a', 'b'], outputs: ['s'] }],
});

/** relu over a fixed [1, 3] input: never batched. */
const fixed = encodeOnnxModel({
  name: 'fixed',
  opset: 13,
  inputs: [{ name: 'x', shape: [1, 3] }],
  outputs: [{ name: 'y', shape: [1, 3] }],
  initializers: [],
  nodes: [{ opType: 'Relu', inputs: ['x'], outputs: ['y'] }],
});

let dir: string;
let r: ReplicaProcess;

const pair = (a: number[][], b: number[][]) => ({
  inputs: [
    { name: 'b', shape: [b.length, 2], datatype: 'FP32', data: b },
    { name: 'a', shape: [a.length, 2], datatype: 'FP32', data: a },
  ],
});

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-signatures-'));
  for (const [id, bytes] of [
    ['adder', adder],
    ['fixed', fixed],
  ] as const) {
    await mkdir(join(dir, id));
    await writeFile(join(dir, id, 'model.onnx'), bytes);
  }
  // The adder's rows are independent: it says so, and is batched.
  await writeFile(join(dir, 'adder', 'config.json'), '{"dynamicBatching":{}}');
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-batch-size', '3', '--batch-wait-ms', '500'] });
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('replica with models of other signatures', () => {
  it('feeds multi-input models by input name and batches them per request rows', async () => {
    const jobs = [
      { a: [[1, 2]], b: [[10, 20]] },
      {
        a: [
          [3, 4],
          [5, 6],
        ],
        b: [
          [30, 40],
          [50, 60],
        ],
      },
      { a: [[7, 8]], b: [[70, 80]] },
    ];
    const answers = await Promise.all(jobs.map((j) => post(`${r.url}/v2/models/adder/infer`, pair(j.a, j.b))));
    answers.forEach((ans, i) => {
      const j = jobs[i]!;
      expect(ans.status).toBe(200);
      const out = (ans.body.outputs as { name: string; shape: number[]; data: number[] }[])[0]!;
      expect(out.name).toBe('s');
      expect(out.shape).toEqual([j.a.length, 2]);
      expect(out.data).toEqual(j.a.flat().map((v, k) => v + (j.b.flat()[k] ?? NaN)));
    });
    expect((await r.metrics()).get('modelmux_replica_batch_size_requests_sum')).toBe(3);
    expect((await r.metrics()).get('modelmux_replica_batch_size_requests_count')).toBe(1);
  });

  it('refuses the rows form for a multi-input model and a missing input by name', async () => {
    const rows = await post(`${r.url}/`, [[1, 2]], { serve_multiplexed_model_id: 'adder' });
    expect(rows.status).toBe(400);
    expect(rows.body.error).toBe('invalid_request');
    const missing = await post(`${r.url}/v2/models/adder/infer`, { inputs: [{ name: 'a', shape: [1, 2], datatype: 'FP32', data: [1, 2] }] });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('input_mismatch');
    expect(missing.body.message).toContain('"b"');
  });

  it('serves a model with a fixed dim 0 without batching it, and refuses other batch sizes', async () => {
    const ok = await post(`${r.url}/invocations`, [-1, 0, 2], { 'X-Amzn-SageMaker-Target-Model': 'fixed' });
    expect(ok.status).toBe(200);
    expect(ok.body.predictions).toEqual([[0, 0, 2]]);
    const two = await post(
      `${r.url}/invocations`,
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
      { 'X-Amzn-SageMaker-Target-Model': 'fixed' },
    );
    expect(two.status).toBe(400);
    expect(two.body.error).toBe('input_mismatch');
    const meta = await get(`${r.url}/v2/models/fixed`);
    expect(meta.body.inputs).toEqual([{ name: 'x', datatype: 'FP32', shape: [1, 3] }]);
  });
});
