import { jest } from '@jest/globals';
import { rm } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';
import { get, post } from './wine-fixtures.js';

jest.setTimeout(60_000);

/** The model repository extension on a replica: pre-warm and drain models. */

let dir: string;
let r: ReplicaProcess;

beforeAll(async () => {
  dir = await wineModelFolder('modelmux-repository-', ['alpha', 'beta']);
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '2'] });
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

const index = async (body: unknown = {}): Promise<unknown> => (await post(`${r.url}/v2/repository/index`, body)).body;

describe('model repository extension', () => {
  it('is listed in the server metadata beside binary data', async () => {
    expect((await get(`${r.url}/v2`)).body).toMatchObject({ extensions: ['binary_tensor_data', 'model_repository'] });
  });

  it('loads a model before any request, lists it, and unloads it', async () => {
    expect(await index()).toEqual([]);
    const load = await post(`${r.url}/v2/repository/models/alpha/load`, {});
    expect(load.status).toBe(200);
    expect(load.headers.get('x-modelmux-cache')).toBe('miss');
    expect(await index()).toEqual([{ name: 'alpha', state: 'READY' }]);
    expect(await index({ ready: true })).toEqual([{ name: 'alpha', state: 'READY' }]);
    // A request finds it loaded.
    const infer = await post(`${r.url}/v2/models/alpha/infer`, {
      inputs: [{ name: 'features', shape: [1, 11], datatype: 'FP32', data: [[7.4, 0.7, 0, 1.9, 0.076, 11, 34, 0.9978, 3.51, 0.56, 9.4]] }],
    });
    expect(infer.headers.get('x-modelmux-cache')).toBe('hit');
    const unload = await post(`${r.url}/v2/repository/models/alpha/unload`, {});
    expect(unload.status).toBe(200);
    await eventually(async () => expect((await get(`${r.url}/models`)).body.loaded).toEqual([]), 10_000, 25);
    expect(await index()).toEqual([]);
    expect((await r.metrics()).get('modelmux_replica_model_releases_total')).toBe(1);
  });

  it('answers a load of a model the store lacks as a request would', async () => {
    const a = await post(`${r.url}/v2/repository/models/gamma/load`, {});
    expect(a.status).toBe(404);
    expect(a.body.error).toBe('model_not_found');
  });

  it('refuses a malformed index request', async () => {
    const a = await post(`${r.url}/v2/repository/index`, { ready: 'yes' });
    expect(a.status).toBe(400);
    expect(a.body.error).toBe('invalid_request');
  });
});
