import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jest } from '@jest/globals';
import { tarGz } from '../../../common/tar-gz.js';
import { wineModelBytes } from '../../../common/wine-model.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { expectClose, expected, post, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(120_000);

let s3: S3Server;
let r: ReplicaProcess | undefined;
let cacheDir: string;

/** A model.tar.gz as SageMaker's artifacts are: the model beside files the replica reads past. */
const archive = (weights: string): Promise<Buffer> =>
  tarGz([
    { name: 'code/model.py', body: 'def handle(inputs, context): ...' },
    { name: 'serving.properties', body: 'engine=Python' },
    { name: 'model.onnx', body: wineModelBytes(weights) },
  ]);

beforeAll(async () => {
  s3 = await startS3Server();
  cacheDir = await mkdtemp(join(tmpdir(), 'modelmux-archives-'));
  await s3.put('mme/a.tar.gz', await archive('arch-a'));
  await s3.put('mme/b.tar.gz', await archive('arch-b'));
  await s3.put('mme/x.tar.gz', new TextEncoder().encode('not a gzip stream'));
  // One slot and no revalidation window: every switch between models reloads and asks the store.
  r = await startReplica({
    args: ['--model-source', `s3://${s3.bucket}/mme`, '--s3-endpoint', s3.endpoint, '--max-models', '1', '--revalidate-after-ms', '0', '--cache-dir', cacheDir],
    env: s3.awsEnv,
  });
}, 300_000);

afterAll(async () => {
  await r?.stop();
  await s3?.stop();
  await rm(cacheDir, { recursive: true, force: true });
});

describe('a replica over model.tar.gz archives in S3', () => {
  const rows = wineRows(2);
  const ask = (id: string): ReturnType<typeof post> => post(`${r?.url ?? ''}/v2/models/${id}/infer`, v2Body(rows));
  const fetches = async (source: string): Promise<number> => (await r?.metrics())?.get(`modelmux_replica_model_fetches_total{source="${source}"}`) ?? 0;

  it('serves the model in an archive, reloads it from disk after an eviction, and downloads it again once the store replaces it', async () => {
    expectClose(v2Outputs(await ask('a.tar.gz')), expected('arch-a', rows));
    expectClose(v2Outputs(await ask('b.tar.gz')), expected('arch-b', rows));
    const reloaded = await ask('a.tar.gz');
    expect(reloaded.headers.get('x-modelmux-cache')).toBe('miss');
    expectClose(v2Outputs(reloaded), expected('arch-a', rows));
    expect({ store: await fetches('store'), disk: await fetches('disk') }).toEqual({ store: 2, disk: 1 });

    // A new archive under the same key has another ETag: the unpacked copy on disk is stale.
    await s3.put('mme/a.tar.gz', await archive('arch-c'));
    await ask('b.tar.gz');
    expectClose(v2Outputs(await ask('a.tar.gz')), expected('arch-c', rows));
    expect(await fetches('store')).toBe(3);
  });

  it('refuses a broken archive with archive_invalid, caches nothing of it, and serves it once the store holds a good one', async () => {
    const broken = await ask('x.tar.gz');
    expect({ status: broken.status, error: broken.body.error }).toEqual({ status: 422, error: 'archive_invalid' });
    const again = await ask('x.tar.gz');
    expect(again.body.error).toBe('archive_invalid');
    await s3.put('mme/x.tar.gz', await archive('arch-x'));
    const fixed = await ask('x.tar.gz');
    expect(fixed.status).toBe(200);
    expectClose(v2Outputs(fixed), expected('arch-x', rows));
  });

  it('refuses an archive whose entry climbs out of its folder', async () => {
    await s3.put('mme/escape.tar.gz', await tarGz([{ name: '../../model.onnx', body: wineModelBytes('arch-a') }]));
    const a = await ask('escape.tar.gz');
    expect({ status: a.status, error: a.body.error }).toEqual({ status: 422, error: 'archive_invalid' });
    expect(String(a.body.message)).toContain('climbs out');
  });

  it('serves archives by keys with slashes, names their downloads by the encoded key, and reloads one from that file after an eviction', async () => {
    await s3.put('mme/tenant/7/model.tar.gz', await archive('tenant-7'));
    await s3.put('mme/tenant/8/model.tar.gz', await archive('tenant-8'));
    expectClose(v2Outputs(await ask('tenant%2F7%2Fmodel.tar.gz')), expected('tenant-7', rows));
    expectClose(v2Outputs(await ask('tenant%2F8%2Fmodel.tar.gz')), expected('tenant-8', rows));
    const files = await readdir(join(cacheDir, 'files'));
    expect(files.filter((f) => f.startsWith('tenant')).sort()).toEqual([
      expect.stringMatching(/^tenant%2F7%2Fmodel\.tar\.gz\.[0-9a-f]{12}\.onnx$/),
      expect.stringMatching(/^tenant%2F8%2Fmodel\.tar\.gz\.[0-9a-f]{12}\.onnx$/),
    ]);

    const before = { store: await fetches('store'), disk: await fetches('disk') };
    const reloaded = await ask('tenant%2F7%2Fmodel.tar.gz');
    expect(reloaded.headers.get('x-modelmux-cache')).toBe('miss');
    expectClose(v2Outputs(reloaded), expected('tenant-7', rows));
    expect({ store: await fetches('store'), disk: await fetches('disk') }).toEqual({ store: before.store, disk: before.disk + 1 });
  });

  it.each([
    ['tenant%2F..%2Fa.tar.gz', '".."'],
    ['%2Fa.tar.gz', 'start or end with "/"'],
    ['tenant%2F%2F7%2Fmodel.tar.gz', '"//"'],
    ['tenant%2F7%2Fmodel', 'only an archive key'],
  ])('refuses the key %s with invalid_model_id, saying why', async (segment, why) => {
    const a = await ask(segment);
    expect({ status: a.status, error: a.body.error }).toEqual({ status: 400, error: 'invalid_model_id' });
    expect(String(a.body.message)).toContain(why);
  });
});
