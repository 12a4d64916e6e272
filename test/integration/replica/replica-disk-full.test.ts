import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import { hiddenUnitsForBytes, wineForward, wineModelBytes, wineWeights } from '../../../common/wine-model.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { expectClose, post, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(120_000);

const run = promisify(execFile);

/**
 * The replica's cache folder is a 2 MiB tmpfs: two files of 0.8 MiB fit, a third does not until
 * the file of a model no longer loaded is dropped, and a 2.5 MiB model never fits.
 */
const MID = hiddenUnitsForBytes(0.8 * 1024 * 1024);
const BIG = hiddenUnitsForBytes(2.5 * 1024 * 1024);

let s3: S3Server;
let r: ReplicaProcess;
let cacheDir: string;
let mounted = false;
const rows = wineRows(2);

const infer = (id: string) => post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));
const filesOf = async (id: string): Promise<string[]> => (await readdir(join(cacheDir, 'files'))).filter((f) => f.startsWith(`${id}.`));
const fetches = async (source: string): Promise<number> => (await r.metrics()).get(`modelmux_replica_model_fetches_total{source="${source}"}`) ?? 0;

beforeAll(async () => {
  s3 = await startS3Server();
  for (const id of ['mid-a', 'mid-b', 'mid-c']) await s3.put(`wine/${id}/model.onnx`, wineModelBytes(id, MID));
  await s3.put('wine/big/model.onnx', wineModelBytes('big', BIG));
  await s3.put('wine/small/model.onnx', wineModelBytes('small'));
  cacheDir = await mkdtemp(join(tmpdir(), 'modelmux-full-'));
  await run('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', cacheDir]);
  mounted = true;
  r = await startReplica({
    args: ['--model-source', `s3://${s3.bucket}/wine`, '--s3-endpoint', s3.endpoint, '--cache-dir', cacheDir, '--max-models', '1'],
    env: s3.awsEnv,
  });
}, 600_000);

afterAll(async () => {
  await r?.stop();
  if (mounted) await run('umount', [cacheDir]);
  await rm(cacheDir, { recursive: true, force: true });
  await s3?.stop();
});

describe('a replica whose disk fills up', () => {
  it('makes room by dropping the file of a model it no longer holds loaded, and loads the new one', async () => {
    for (const id of ['mid-a', 'mid-b']) expect((await infer(id)).status).toBe(200);
    // mid-a was evicted from memory by mid-b (one slot) but its file stays for reloads.
    expect(await filesOf('mid-a')).toHaveLength(1);
    const c = await infer('mid-c');
    expect(c.status).toBe(200);
    expectClose(v2Outputs(c), wineForward(wineWeights('mid-c', MID), rows));
    expect(await filesOf('mid-a')).toEqual([]);
    // mid-b was loaded when the disk filled, so its file stayed: reloading it needs no download.
    expect(await filesOf('mid-b')).toHaveLength(1);
    const before = await fetches('store');
    expect((await infer('mid-a')).status).toBe(200);
    expect(await fetches('store')).toBe(before + 1);
  });

  it('answers 507 cache_full for a model that does not fit, leaves no partial file, and keeps serving the models that fit', async () => {
    for (let attempt = 0; attempt < 2; attempt++) {
      const big = await infer('big');
      expect({ attempt, status: big.status, error: big.body.error }).toEqual({ attempt, status: 507, error: 'cache_full' });
      expect(String(big.body.message)).toMatch(/ENOSPC/);
    }
    expect((await readdir(join(cacheDir, 'files'))).filter((f) => f.startsWith('big.') || f.endsWith('.tmp'))).toEqual([]);
    for (const id of ['small', 'mid-b', 'small']) {
      const a = await infer(id);
      expect({ id, status: a.status }).toEqual({ id, status: 200 });
    }
    expect((await r.metrics()).get('modelmux_replica_requests_total{form="v2",code="507"}')).toBe(2);
  });
});
