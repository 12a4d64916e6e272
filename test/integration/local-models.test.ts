import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { hiddenUnitsForBytes, wineModelBytes } from '../../common/wine-model.js';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';

const run = promisify(execFile);
const MAIN = join(process.cwd(), 'dist/cli/main.js');

async function objectBytes(s3: S3Server, key: string): Promise<Uint8Array> {
  const out = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
  if (!out.Body) throw new Error(`no body for ${key}`);
  return out.Body.transformToByteArray();
}

describe('modelmux models', () => {
  let s3: S3Server;
  let dir: string;

  beforeAll(async () => {
    s3 = await startS3Server();
    dir = await mkdtemp(join(tmpdir(), 'modelmux-models-'));
  }, 180_000);

  afterAll(async () => {
    await s3?.stop();
    await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it('writes <dir>/<ID>/model.onnx with the deterministic bytes and leaves them alone on a second run', async () => {
    const first = await run(process.execPath, [MAIN, 'models', '--out', dir, '--count', '3', '--prefix', 'red-']);
    expect(JSON.parse(first.stdout.trim())).toMatchObject({ msg: 'example models ready', written: 3, skipped: 0 });
    for (const id of ['red-0', 'red-1', 'red-2']) {
      expect(new Uint8Array(await readFile(join(dir, id, 'model.onnx')))).toEqual(wineModelBytes(id));
    }
    const second = await run(process.execPath, [MAIN, 'models', '--out', `file://${dir}`, '--count', '3', '--prefix', 'red-']);
    expect(JSON.parse(second.stdout.trim())).toMatchObject({ written: 0, skipped: 3 });
  });

  it('uploads models of the asked size to s3://bucket/prefix through examples/upload-models.sh', async () => {
    const env = { ...process.env, ...s3.awsEnv, MODELMUX_S3_ENDPOINT: s3.endpoint };
    await run('bash', ['examples/upload-models.sh', `s3://${s3.bucket}/wine`, '2', '0.25'], { env });
    const hidden = hiddenUnitsForBytes(0.25 * 1024 * 1024);
    for (const id of ['wine-0', 'wine-1']) {
      const bytes = await objectBytes(s3, `wine/${id}/model.onnx`);
      expect(bytes).toEqual(wineModelBytes(id, hidden));
      expect(bytes.byteLength).toBeGreaterThan(0.2 * 1024 * 1024);
    }
  }, 60_000);

  it('lists every configuration problem at once and exits 2', async () => {
    const err = await run(process.execPath, [MAIN, 'models', '--out', 'http://example.invalid/x', '--count', 'many']).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 2 });
    const stderr = (err as { stderr: string }).stderr;
    expect(stderr).toContain('--out/MODELMUX_MODELS_OUT');
    expect(stderr).toContain('--count/MODELMUX_MODELS_COUNT');
  });
});
