import { expect, jest } from '@jest/globals';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { eventually } from '../../../harness/eventually.js';
import { writeExternalDataModel } from '../../helpers/datatype-models.js';
import { runNodeScript } from '../../helpers/node-script.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';

jest.setTimeout(120_000);

/** Models whose weights sit in files beside model.onnx, served from file:// and S3 stores with shared graphs on (the default). */

let dir: string;
let r: ReplicaProcess;
const x = [
  [1, 2, 3],
  [-1, 0.5, 4],
];

/** onnxruntime's own answer for the model file, in a Node process of its own. */
function answerHere(id: string): Promise<number[]> {
  return runNodeScript<number[]>(`
    import ort from 'onnxruntime-node';
    const s = await ort.InferenceSession.create(${JSON.stringify(join(dir, id, 'model.onnx'))});
    const out = await s.run({ x: new ort.Tensor('float32', Float32Array.from(${JSON.stringify(x.flat())}), [2, 3]) });
    process.stdout.write(JSON.stringify(Array.from(out.y.data)));
  `);
}

async function infer(id: string, replica = r): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${replica.url}/v2/models/${id}/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 3], data: x }] }) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'modelmux-external-'));
  writeExternalDataModel(dir, 'one', Float32Array.from([1, 2, 3, 4, 5, 6]), Float32Array.from([0.5, -0.5]));
  // The same graph, other weights, under another name in a subfolder.
  writeExternalDataModel(dir, 'two', Float32Array.from([-1, 0, 2, 1, 0.25, 3]), Float32Array.from([1, 2]), 'weights/w.bin');
  writeExternalDataModel(dir, 'escapes', Float32Array.from([1, 2, 3, 4, 5, 6]), Float32Array.from([0, 0]), '../one/model.onnx.data');
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '4'], env: {} });
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function expectAnswers(id: string, replica: ReplicaProcess): Promise<void> {
  const a = await infer(id, replica);
  expect(a.status).toBe(200);
  const want = await answerHere(id);
  const got = (a.body['outputs'] as { data: number[] }[])[0]!.data;
  expect(got).toHaveLength(4);
  got.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 5));
}

const FILES = ['one/model.onnx', 'one/model.onnx.data', 'two/model.onnx', 'two/weights/w.bin'];
const sizeOf = async (files: readonly string[]): Promise<number> => (await Promise.all(files.map(async (f) => (await stat(join(dir, f))).size))).reduce((a, b) => a + b, 0);

describe('external data from a file:// store', () => {
  it('serves each model with its own external weights, as onnxruntime computes them', async () => {
    for (const id of ['one', 'two']) await expectAnswers(id, r);
    expect(await answerHere('one')).not.toEqual(await answerHere('two'));
  });

  it('counts the external files in the bytes of the loaded models', async () => {
    expect((await r.metrics()).get('modelmux_replica_loaded_bytes')).toBe(await sizeOf(FILES));
  });

  it('refuses a location that leaves the model folder', async () => {
    const a = await infer('escapes');
    expect(a.status).toBe(422);
    expect(a.body).toMatchObject({ error: 'model_load_failed', message: expect.stringMatching(/external data location "\.\.\/one\/model\.onnx\.data" is refused: it leaves the model folder/) });
  });
});

describe('external data from an S3 store', () => {
  let s3: S3Server;
  let cacheDir: string;
  let replica: ReplicaProcess;

  beforeAll(async () => {
    s3 = await startS3Server();
    for (const f of [...FILES, 'escapes/model.onnx']) await s3.put(`m/${f}`, await readFile(join(dir, f)));
    await s3.put('m/missing/model.onnx', await readFile(join(dir, 'one', 'model.onnx')));
    cacheDir = await mkdtemp(join(tmpdir(), 'modelmux-external-cache-'));
    replica = await startReplica({
      args: ['--model-source', `s3://${s3.bucket}/m`, '--s3-endpoint', s3.endpoint, '--cache-dir', cacheDir, '--max-models', '1', '--disk-cache-bytes', '0'],
      env: s3.awsEnv,
    });
  }, 600_000);

  afterAll(async () => {
    await replica?.stop();
    await s3?.stop();
    await rm(cacheDir, { recursive: true, force: true });
  });

  it("downloads the files beside model.onnx with it, counts them, and keeps two models' apart", async () => {
    await expectAnswers('one', replica);
    const bytes = (await replica.metrics()).get('modelmux_replica_loaded_bytes') ?? 0;
    // The model's copy names its data files in a folder of its own: a few bytes longer.
    const original = await sizeOf(FILES.slice(0, 2));
    expect(bytes).toBeGreaterThan(original);
    expect(bytes).toBeLessThan(original + 100);
    await expectAnswers('two', replica); // evicts "one", whose files go with it
    await expectAnswers('one', replica);
    // No disk cache: each download, its data folder included, is deleted once its session holds it.
    await eventually(async () => expect(await readdir(join(cacheDir, 'files'))).toEqual([]), 10_000, 25);
  });

  it('keeps the data files with the model on disk and reloads from there', async () => {
    const kept = await mkdtemp(join(tmpdir(), 'modelmux-external-kept-'));
    const withDisk = await startReplica({ args: ['--model-source', `s3://${s3.bucket}/m`, '--s3-endpoint', s3.endpoint, '--cache-dir', kept, '--max-models', '1'], env: s3.awsEnv });
    try {
      await expectAnswers('one', withDisk);
      await expectAnswers('two', withDisk);
      await expectAnswers('one', withDisk); // from the disk copy
      const files = await readdir(join(kept, 'files'));
      expect(files.filter((f) => f.endsWith('.d'))).toHaveLength(2);
      expect((await withDisk.metrics()).get('modelmux_replica_model_fetches_total{source="disk"}')).toBe(1);
    } finally {
      await withDisk.stop();
      await rm(kept, { recursive: true, force: true });
    }
  });

  it('answers 422 for a model whose data file is not in the store, and for a location outside its folder', async () => {
    const missing = await infer('missing', replica);
    expect(missing.status).toBe(422);
    expect(missing.body).toMatchObject({ error: 'model_load_failed', message: expect.stringMatching(/external data file "model\.onnx\.data", which is not beside its model\.onnx/) });
    const escapes = await infer('escapes', replica);
    expect(escapes.status).toBe(422);
    expect(escapes.body).toMatchObject({ error: 'model_load_failed', message: expect.stringMatching(/leaves the model folder/) });
  });
});
