import { expect, jest } from '@jest/globals';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { wineModelBytes } from '../../../common/wine-model.js';
import { batchMeanModel, writeModel } from '../../helpers/datatype-models.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { expectClose, expected, post, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(60_000);

/** `<ID>/config.json`: each model's own batching and session settings, over the pool's. */

let dir: string;
let r: ReplicaProcess;

const CONFIGS: Record<string, unknown> = {
  'wine-batched': { dynamicBatching: { maxBatchSize: 4, batchWaitMs: 2000 } },
  'wine-own': { shareGraph: false },
  'wine-threads': { intraOpThreads: 2, interOpThreads: 2 },
  'bad-size': { dynamicBatching: { maxBatchSize: 0 } },
  'bad-key': { dynamicBatching: {}, threads: 4 },
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-model-config-'));
  for (const id of ['wine-plain', 'wine-batched', 'wine-own', 'wine-threads', 'bad-size', 'bad-key']) writeModel(dir, id, wineModelBytes(id));
  writeModel(dir, 'batch-mean', batchMeanModel());
  writeModel(dir, 'bad-json', wineModelBytes('bad-json'));
  for (const [id, config] of Object.entries(CONFIGS)) await writeFile(join(dir, id, 'config.json'), JSON.stringify(config));
  await writeFile(join(dir, 'bad-json', 'config.json'), '{"dynamicBatching":');
  // The pool batches up to 4 with a long wait: only models that say their rows are independent use it.
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '8', '--max-batch-size', '4', '--batch-wait-ms', '300'] });
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

const batches = async (): Promise<{ count: number; sum: number }> => {
  const m = await r.metrics();
  return { count: m.get('modelmux_replica_batch_size_requests_count') ?? 0, sum: m.get('modelmux_replica_batch_size_requests_sum') ?? 0 };
};

describe('model configuration', () => {
  it('never batches a model that does not say its rows are independent', async () => {
    const xs = [
      [1, 2, 3],
      [10, 20, 30],
      [-1, 0, 1],
      [4, 4, 7],
    ];
    const one = { inputs: [{ name: 'x', shape: [1, 3], datatype: 'FP32', data: [[0, 0, 0]] }] };
    expect((await post(`${r.url}/v2/models/batch-mean/infer`, one)).status).toBe(200); // loaded before the count
    const before = await batches();
    const answers = await Promise.all(xs.map((x) => post(`${r.url}/v2/models/batch-mean/infer`, { inputs: [{ name: 'x', shape: [1, 3], datatype: 'FP32', data: [x] }] })));
    answers.forEach((a, i) => {
      const x = xs[i]!;
      const mean = x.reduce((s, v) => s + v, 0) / x.length;
      expect(a.status).toBe(200);
      expectClose(
        v2Outputs(a),
        x.map((v) => v - mean),
      );
    });
    const after = await batches();
    expect({ count: after.count - before.count, sum: after.sum - before.sum }).toEqual({ count: 4, sum: 4 });
  });

  it('batches a model whose config.json turns dynamic batching on, with its own size', async () => {
    await post(`${r.url}/v2/models/wine-batched/infer`, v2Body(wineRows(1)));
    const before = await batches();
    const jobs = [1, 2, 1, 3].map((n, k) => wineRows(n, k * 7));
    const answers = await Promise.all(jobs.map((rows) => post(`${r.url}/v2/models/wine-batched/infer`, v2Body(rows))));
    answers.forEach((a, i) => expectClose(v2Outputs(a), expected('wine-batched', jobs[i]!)));
    const after = await batches();
    // Full at 4 requests: at once, long before the model's 2 s wait.
    expect({ count: after.count - before.count, sum: after.sum - before.sum }).toEqual({ count: 1, sum: 4 });
  });

  it('gives a model that will not share a graph, or sets its threads, a session of its own', async () => {
    const opens = async (kind: string): Promise<number> => (await r.metrics()).get(`modelmux_replica_model_opens_total{kind="${kind}"}`) ?? 0;
    const shared = await opens('shared_graph');
    const own = await opens('own_session');
    const rows = wineRows(2);
    for (const id of ['wine-plain', 'wine-own', 'wine-threads']) {
      const a = await post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));
      expect(a.status).toBe(200);
      expectClose(v2Outputs(a), expected(id, rows));
    }
    expect({ shared: (await opens('shared_graph')) - shared, own: (await opens('own_session')) - own }).toEqual({ shared: 1, own: 2 });
  });

  it('refuses a model whose config.json is invalid, saying what is wrong', async () => {
    const cases: [string, RegExp][] = [
      ['bad-size', /config\.json of model "bad-size" is invalid: dynamicBatching\.maxBatchSize: /],
      ['bad-key', /config\.json of model "bad-key" is invalid: .*threads/],
      ['bad-json', /config\.json of model "bad-json" is not JSON/],
    ];
    for (const [id, message] of cases) {
      const a = await post(`${r.url}/v2/models/${id}/infer`, v2Body(wineRows(1)));
      expect(a.status).toBe(422);
      expect(a.body).toMatchObject({ error: 'model_load_failed', message: expect.stringMatching(message) });
    }
  });
});
