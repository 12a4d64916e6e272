import { expect, jest } from '@jest/globals';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { WINE_FEATURES, WINE_INPUT, wineModelBytes } from '../../../common/wine-model.js';
import { writeModel } from '../../helpers/datatype-models.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { expectClose, expected, get, post, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(60_000);

/** A model is run once before it is listed as loaded (replica/onnx/warm-up.ts, ADR 0046). */

let dir: string;
let r: ReplicaProcess;

const CONFIGS: Record<string, unknown> = {
  'wine-own-input': { warmup: { inputs: [{ name: WINE_INPUT, shape: [2, WINE_FEATURES], datatype: 'FP32', data: wineRows(2).flat() }] } },
  'wine-bad-input': { warmup: { inputs: [{ name: 'not-an-input', shape: [1, WINE_FEATURES], datatype: 'FP32', data: wineRows(1).flat() }] } },
  'wine-no-warmup': { warmup: false },
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-warm-up-'));
  for (const id of ['wine-zeros', 'wine-joins', ...Object.keys(CONFIGS)]) writeModel(dir, id, wineModelBytes(id));
  writeModel(dir, 'wine-other-shape', wineModelBytes('wine-other-shape', 24));
  for (const [id, config] of Object.entries(CONFIGS)) await writeFile(join(dir, id, 'config.json'), JSON.stringify(config));
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '8'] });
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

const phases = async (): Promise<{ load: number; warm: number }> => {
  const m = await r.metrics();
  return {
    load: m.get('modelmux_replica_model_load_phase_seconds_count{phase="load"}') ?? 0,
    warm: m.get('modelmux_replica_model_load_phase_seconds_count{phase="warm"}') ?? 0,
  };
};

const loaded = async (): Promise<unknown> => (await get(`${r.url}/models`)).body.loaded;

describe('warm-up before a model is listed', () => {
  it('warms a model on zeros of its input shapes, or on its config.json input, before it serves', async () => {
    const before = await phases();
    for (const id of ['wine-zeros', 'wine-own-input']) {
      const rows = wineRows(3);
      const a = await post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));
      expect(a.status).toBe(200);
      expectClose(v2Outputs(a), expected(id, rows));
    }
    const after = await phases();
    expect({ load: after.load - before.load, warm: after.warm - before.warm }).toEqual({ load: 2, warm: 2 });
    expect(await loaded()).toEqual(expect.arrayContaining(['wine-zeros', 'wine-own-input']));
  });

  it('skips the run for a model joining a shared graph that already ran, not for a new graph', async () => {
    const before = await phases();
    expect((await post(`${r.url}/v2/models/wine-joins/infer`, v2Body(wineRows(1)))).status).toBe(200);
    const joined = await phases();
    expect({ load: joined.load - before.load, warm: joined.warm - before.warm }).toEqual({ load: 1, warm: 0 });
    expect((await post(`${r.url}/v2/models/wine-other-shape/infer`, v2Body(wineRows(1)))).status).toBe(200);
    const after = await phases();
    expect({ load: after.load - joined.load, warm: after.warm - joined.warm }).toEqual({ load: 1, warm: 1 });
  });

  it('refuses a model whose warm-up fails, and never lists it as loaded', async () => {
    for (let attempt = 0; attempt < 2; attempt++) {
      const a = await post(`${r.url}/v2/models/wine-bad-input/infer`, v2Body(wineRows(1)));
      expect(a.status).toBe(422);
      expect(a.body).toMatchObject({ error: 'model_load_failed', message: expect.stringMatching(/warm-up input of config\.json does not fit the model/) });
      expect(await loaded()).not.toContain('wine-bad-input');
    }
    expect((await get(`${r.url}/models`)).body.loading).toEqual([]);
  });

  it('skips the run for a model whose config.json says warmup: false', async () => {
    const before = await phases();
    expect((await post(`${r.url}/v2/models/wine-no-warmup/infer`, v2Body(wineRows(1)))).status).toBe(200);
    const after = await phases();
    expect({ load: after.load - before.load, warm: after.warm - before.warm }).toEqual({ load: 1, warm: 0 });
  });

  it('reports no device budget under cpu', async () => {
    const m = await r.metrics();
    expect({ used: m.get('modelmux_replica_device_bytes_used'), budget: m.get('modelmux_replica_device_bytes_budget') }).toEqual({ used: 0, budget: 0 });
  });
});
