import { rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { wineModelBytes } from '../../../common/wine-model.js';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';
import { expectClose, expected, get, post, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(120_000);

/** The replica's revalidation window: host bytes older than this are checked against the store. */
const WINDOW_MS = 1500;

let s3: S3Server;
let r: ReplicaProcess;
const rows = wineRows(3);

async function answer(id: string, on: ReplicaProcess = r): Promise<number[]> {
  const a = await post(`${on.url}/v2/models/${id}/infer`, v2Body(rows));
  expect(a.status).toBe(200);
  return v2Outputs(a);
}

const metric = async (name: string): Promise<number> => (await r.metrics()).get(name) ?? 0;
const table = async (): Promise<{ loaded: string[]; host?: string[] }> => (await get(`${r.url}/models`)).body as { loaded: string[]; host?: string[] };

beforeAll(async () => {
  s3 = await startS3Server();
  for (const id of ['a', 'b']) await s3.put(`wine/${id}/model.onnx`, wineModelBytes(id));
  // One slot, no disk cache: only the host tier can spare a reload its download.
  r = await startReplica({
    args: [
      '--model-source',
      `s3://${s3.bucket}/wine`,
      '--s3-endpoint',
      s3.endpoint,
      '--max-models',
      '1',
      '--cache-policy',
      'lru',
      '--disk-cache-bytes',
      '0',
      '--host-tier-bytes',
      '16Mi',
      '--revalidate-after-ms',
      String(WINDOW_MS),
      '--revalidate-loaded-ms',
      '0',
    ],
    env: s3.awsEnv,
  });
}, 600_000);

afterAll(async () => {
  await r?.stop();
  await s3?.stop();
});

describe('the host-memory tier', () => {
  it('reloads an evicted model from host memory without the store, and lists it under host while demoted', async () => {
    expectClose(await answer('a'), expected('a', rows));
    expectClose(await answer('b'), expected('b', rows));
    expect(await table()).toMatchObject({ loaded: ['b'], host: ['a'] });
    expect(await metric('modelmux_replica_host_tier_models')).toBe(2);
    // The downloads as the replica keeps them: rewritten with their weights aligned, a little larger.
    expect(await metric('modelmux_replica_host_tier_bytes')).toBeGreaterThanOrEqual(wineModelBytes('a').length + wineModelBytes('b').length);
    const downloads = await metric('modelmux_replica_model_fetches_total');
    expect(downloads).toBe(2);
    expect(await metric('modelmux_replica_model_loads_by_tier_total{tier="store"}')).toBe(2);

    expectClose(await answer('a'), expected('a', rows));
    expect(await metric('modelmux_replica_model_loads_by_tier_total{tier="host"}')).toBe(1);
    expect(await metric('modelmux_replica_model_load_tier_seconds_count{tier="host"}')).toBe(1);
    // The store was not asked for the file again: no fetch of any source.
    expect(await metric('modelmux_replica_model_fetches_total')).toBe(downloads);
    expect(await table()).toMatchObject({ loaded: ['a'], host: ['b'] });
  });

  it('never serves a model changed in the store from host memory once the revalidation window has passed', async () => {
    // b back from host memory, a demoted; then a new version of a in the store.
    expectClose(await answer('b'), expected('b', rows));
    await eventually(async () => expect((await table()).host).toEqual(['a']), 5000, 25);
    await s3.put('wine/a/model.onnx', wineModelBytes('a-v2'));
    await sleep(WINDOW_MS + 100);
    const hostLoads = await metric('modelmux_replica_model_loads_by_tier_total{tier="host"}');
    const storeLoads = await metric('modelmux_replica_model_loads_by_tier_total{tier="store"}');

    const now = await answer('a');
    expectClose(now, expected('a-v2', rows));
    expect(now).not.toEqual(expected('a', rows));
    expect(await metric('modelmux_replica_model_loads_by_tier_total{tier="host"}')).toBe(hostLoads);
    expect(await metric('modelmux_replica_model_loads_by_tier_total{tier="store"}')).toBe(storeLoads + 1);

    // The new version took the old one's place: evicted again, a comes back from memory as v2.
    expectClose(await answer('b'), expected('b', rows));
    expectClose(await answer('a'), expected('a-v2', rows));
    expect(await metric('modelmux_replica_model_loads_by_tier_total{tier="host"}')).toBe(hostLoads + 2);
  });

  it('follows a file:// store too: a model file replaced in the folder is not served from memory past the window', async () => {
    const dir = await wineModelFolder('modelmux-host-tier-', ['a', 'b']);
    const f = await startReplica({
      args: ['--model-source', `file://${dir}`, '--max-models', '1', '--cache-policy', 'lru', '--host-tier-bytes', '16Mi', '--revalidate-after-ms', String(WINDOW_MS), '--revalidate-loaded-ms', '0'],
    });
    try {
      const loads = async (tier: string): Promise<number> => (await f.metrics()).get(`modelmux_replica_model_loads_by_tier_total{tier="${tier}"}`) ?? 0;
      for (const id of ['a', 'b', 'a']) await answer(id, f);
      expect([await loads('store'), await loads('host')]).toEqual([2, 1]);
      // Replaced by a rename, as a deploy would: a new inode, so a new version.
      await writeFile(join(dir, 'a', 'model.onnx.new'), wineModelBytes('a-v2'));
      await rename(join(dir, 'a', 'model.onnx.new'), join(dir, 'a', 'model.onnx'));
      expectClose(await answer('b', f), expected('b', rows));
      await sleep(WINDOW_MS + 100);
      expectClose(await answer('a', f), expected('a-v2', rows));
      expect([await loads('store'), await loads('host')]).toEqual([3, 2]);
    } finally {
      await f.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
