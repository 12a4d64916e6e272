import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { HEADER_SAGEMAKER_MODEL } from '../../common/names.js';
import { SAMPLE_WINE, wineForward, wineWeights } from '../../common/wine-model.js';
import { startLocal, type LocalProcess } from '../helpers/local-process.js';
import { parsePrometheus } from '../../harness/modelmux-process.js';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';

const run = promisify(execFile);
const MAIN = join(process.cwd(), 'dist/cli/main.js');

describe('modelmux local with an s3:// store', () => {
  let s3: S3Server;
  let local: LocalProcess | undefined;

  beforeAll(async () => {
    s3 = await startS3Server();
    const env = { ...process.env, ...s3.awsEnv, MODELMUX_S3_ENDPOINT: s3.endpoint };
    await run(process.execPath, [MAIN, 'models', '--out', `s3://${s3.bucket}/team-a`, '--count', '3'], { env });
    local = await startLocal(['--port', '0', '--replicas', '2', '--model-source', `s3://${s3.bucket}/team-a`], env, 150_000);
  }, 240_000);

  afterAll(async () => {
    await local?.stop();
    await s3?.stop();
  }, 60_000);

  it('serves the models uploaded to the bucket, and writes no example models there itself', async () => {
    const base = local?.route() ?? '';
    const res = await fetch(`${base}/invocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [HEADER_SAGEMAKER_MODEL]: 'wine-2' },
      body: JSON.stringify({ instances: [SAMPLE_WINE] }),
    });
    const body = (await res.json()) as { predictions?: number[][] };
    expect({ status: res.status, body: res.status === 200 ? 'ok' : body }).toEqual({ status: 200, body: 'ok' });
    expect(body.predictions?.[0]?.[0]).toBeCloseTo(wineForward(wineWeights('wine-2'), [SAMPLE_WINE])[0] ?? NaN, 4);
    expect(local?.stdout()).toContain(`models from s3://${s3.bucket}/team-a`);
    expect(local?.stdout()).not.toContain('wrote example models');
  }, 60_000);

  it('answers model_not_found for an id the bucket does not hold', async () => {
    const base = local?.route() ?? '';
    const res = await fetch(`${base}/invocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [HEADER_SAGEMAKER_MODEL]: 'wine-3' },
      body: JSON.stringify({ instances: [SAMPLE_WINE] }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: 'model_not_found' });
  }, 60_000);

  it('lets the second replica link the file the first one downloaded instead of downloading it again', async () => {
    const replicas = local?.replicaUrls() ?? [];
    expect(replicas).toHaveLength(2);
    const fetches = async (url: string, source: string): Promise<number> =>
      parsePrometheus(await (await fetch(`${url}/metrics`)).text()).get(`modelmux_replica_model_fetches_total{source="${source}"}`) ?? 0;
    const [first, second] = replicas as [string, string];
    const before = { first: await fetches(first, 'store'), second: await fetches(second, 'store') };
    for (const url of replicas) {
      const res = await fetch(`${url}/v2/models/wine-1/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, 11], datatype: 'FP32', data: SAMPLE_WINE }] }),
      });
      expect(res.status).toBe(200);
    }
    // The earlier tests sent wine-2 through the router; wine-1 is new to both replicas.
    expect(await fetches(first, 'store')).toBe(before.first + 1);
    expect({ store: await fetches(second, 'store'), peer: await fetches(second, 'peer') }).toEqual({ store: before.second, peer: 1 });
  }, 60_000);
});
