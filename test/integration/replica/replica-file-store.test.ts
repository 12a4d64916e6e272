import { jest } from '@jest/globals';
import { rm } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { expectClose, expected, get, post, predictions, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';

jest.setTimeout(60_000);

let dir: string;
let r: ReplicaProcess;

beforeAll(async () => {
  dir = await wineModelFolder('modelmux-file-store-', ['alpha', 'beta']);
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '2'], env: {} });
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('replica over a file:// store', () => {
  it('serves each model with its own weights', async () => {
    const rows = wineRows(4);
    const alpha = await post(`${r.url}/v2/models/alpha/infer`, v2Body(rows));
    expect(alpha.status).toBe(200);
    expectClose(v2Outputs(alpha), expected('alpha', rows));
    const beta = await post(`${r.url}/`, { instances: rows }, { serve_multiplexed_model_id: 'beta' });
    expectClose(predictions(beta), expected('beta', rows));
    expect(expected('alpha', rows)).not.toEqual(expected('beta', rows));
  });

  it('lists loaded models in the model table', async () => {
    const table = await get(`${r.url}/models`);
    expect(table.body).toMatchObject({ capacity: 2, loading: [] });
    expect((table.body.loaded as string[]).slice().sort()).toEqual(['alpha', 'beta']);
    expect(Number(table.headers.get('x-modelmux-table-version'))).toBe(table.body.version);
  });

  it('answers 404 for a model missing from the folder', async () => {
    const a = await post(`${r.url}/v2/models/gamma/infer`, v2Body(wineRows(1)));
    expect(a.status).toBe(404);
    expect(a.body.error).toBe('model_not_found');
  });

  it('refuses to start, naming the doctor’s reason, when the CUDA provider is configured but absent', async () => {
    const start = startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--execution-provider', 'cuda'], env: {} });
    await expect(start).rejects.toThrow(/exited with 2[\s\S]*execution provider "cuda" cannot run here: library_missing: library missing \(libonnxruntime_providers_cuda\.so\)/);
  });
});
