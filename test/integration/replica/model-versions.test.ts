import { setTimeout as sleep } from 'node:timers/promises';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { jest } from '@jest/globals';
import { wineModelBytes } from '../../../common/wine-model.js';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';
import { expectClose, expected, get, post, predictions, v2Body, v2Outputs, wineRows, type Answer } from './wine-fixtures.js';

jest.setTimeout(180_000);

/**
 * Model versions (docs/adr/0033-model-versions.md): `wine-7/model.onnx` is the default version,
 * `wine-7/1/` and `wine-7/2/` hold versions 1 and 2, each with weights of its own, served as the
 * models `wine-7`, `wine-7@1` and `wine-7@2` by real replicas behind a real router, from SeaweedFS.
 */

/** How often the replicas check their loaded models against the store. */
const REVALIDATE_MS = 1500;
/** Generous: a check, a HEAD, a download and a session on a busy two-core machine, on top of the interval. */
const SWAP_SLACK_MS = 12_000;

let s3: S3Server;
let rs: ReplicaProcess[];
let rt: RouterProcess;
const rows = wineRows(3);

/** The weights each model of the store was written with (wineModelBytes seeds them by this name). */
const weightsOf: Record<string, string> = { 'wine-7': 'wine-7', 'wine-7@1': 'wine-7@1', 'wine-7@2': 'wine-7@2' };

beforeAll(async () => {
  s3 = await startS3Server();
  await s3.put('store/wine-7/model.onnx', wineModelBytes('wine-7'));
  await s3.put('store/wine-7/1/model.onnx', wineModelBytes('wine-7@1'));
  await s3.put('store/wine-7/2/model.onnx', wineModelBytes('wine-7@2'));
  const args = ['--model-source', `s3://${s3.bucket}/store`, '--s3-endpoint', s3.endpoint, '--max-models', '6', '--revalidate-loaded-ms', String(REVALIDATE_MS)];
  rs = await Promise.all([0, 1].map(() => startReplica({ args, env: s3.awsEnv })));
  rt = await startRouter(['--routes', `/wine=${rs.map((r) => r.url).join(',')}`, '--poll-interval-ms', '200']);
}, 600_000);

afterAll(async () => {
  await rt?.stop(5000);
  await Promise.all((rs ?? []).map((r) => r.stop(5000)));
  await s3?.stop();
});

const loaded = async (r: ReplicaProcess): Promise<string[]> => (await get(`${r.url}/models`)).body.loaded as string[];
const replicaNamed = (name: string | null): ReplicaProcess | undefined => rs.find((r) => `127.0.0.1:${r.port}` === name);

describe('model versions from an S3 store', () => {
  it('serves each version with its own weights through all three request forms', async () => {
    const r = rs[0] as ReplicaProcess;
    const byPath: [string, string][] = [
      ['wine-7', '/v2/models/wine-7/infer'],
      ['wine-7@1', '/v2/models/wine-7/versions/1/infer'],
      ['wine-7@2', '/v2/models/wine-7/versions/2/infer'],
    ];
    const outs: number[][] = [];
    for (const [model, path] of byPath) {
      const a = await post(`${r.url}${path}`, v2Body(rows));
      expect(a.status).toBe(200);
      expectClose(v2Outputs(a), expected(weightsOf[model] as string, rows));
      expect(a.body.model_name).toBe('wine-7');
      expect(a.body.model_version).toBe(model === 'wine-7' ? undefined : model.slice('wine-7@'.length));
      outs.push(v2Outputs(a));
    }
    // Three different sets of weights: no path fell back to another version.
    expect(new Set(outs.map((o) => o.join())).size).toBe(3);

    // id@v wherever an id is written: the same model, already loaded.
    const asId = await post(`${r.url}/v2/models/wine-7@2/infer`, v2Body(rows));
    expect(asId.headers.get('x-modelmux-cache')).toBe('hit');
    expect(v2Outputs(asId)).toEqual(outs[2]);
    const ray = await post(`${r.url}/`, rows, { serve_multiplexed_model_id: 'wine-7@1' });
    expect(ray.status).toBe(200);
    expectClose(predictions(ray), expected('wine-7@1', rows));
    const sagemaker = await post(`${r.url}/invocations`, rows, { 'x-amzn-sagemaker-target-model': 'wine-7@2' });
    expect(sagemaker.status).toBe(200);
    expectClose(predictions(sagemaker), expected('wine-7@2', rows));

    expect((await loaded(r)).sort()).toEqual(['wine-7', 'wine-7@1', 'wine-7@2']);
  });

  it('answers a version missing from the store 404 and a malformed one 400', async () => {
    const r = rs[0] as ReplicaProcess;
    const missing = await post(`${r.url}/v2/models/wine-7/versions/3/infer`, v2Body(rows));
    expect([missing.status, missing.body.error]).toEqual([404, 'model_not_found']);
    const bad = await post(`${r.url}/v2/models/wine-7/versions/latest/infer`, v2Body(rows));
    expect([bad.status, bad.body.error]).toEqual([400, 'invalid_model_id']);
    const twice = await post(`${rt.url}/wine/v2/models/wine-7@1/versions/2/infer`, v2Body(rows));
    expect([twice.status, twice.body.error]).toEqual([400, 'invalid_model_id']);
  });

  it("lists the store's versions in the default version's metadata, and its own in a version's", async () => {
    const r = rs[1] as ReplicaProcess;
    const base = await get(`${r.url}/v2/models/wine-7`);
    expect(base.status).toBe(200);
    expect(base.body).toMatchObject({ name: 'wine-7', versions: ['1', '2'] });
    const v2 = await get(`${r.url}/v2/models/wine-7/versions/2`);
    expect(v2.body).toMatchObject({ name: 'wine-7', versions: ['2'] });
    expect((await get(`${r.url}/v2/models/wine-7/versions/2/ready`)).status).toBe(200);
    expect((await fetch(`${r.url}/v2/models/wine-7/versions/1/ready`)).status).toBe(503);

    // A version uploaded later is listed once the brief cache of the listing has passed.
    await s3.put('store/wine-7/10/model.onnx', wineModelBytes('wine-7@10'));
    await eventually(async () => expect((await get(`${r.url}/v2/models/wine-7`)).body.versions).toEqual(['1', '2', '10']), 10_000, 25);
    const ten = await post(`${r.url}/v2/models/wine-7/versions/10/infer`, v2Body(rows));
    expectClose(v2Outputs(ten), expected('wine-7@10', rows));
  });

  it('places each version as a model of its own through the router, and lists them in the repository index', async () => {
    const answered = new Map<string, string | null>();
    for (const [model, path] of [
      ['wine-7', 'wine-7/infer'],
      ['wine-7@1', 'wine-7/versions/1/infer'],
      ['wine-7@2', 'wine-7@2/infer'],
    ] as const) {
      const a = await post(`${rt.url}/wine/v2/models/${path}`, v2Body(rows));
      expect(a.status).toBe(200);
      expectClose(v2Outputs(a), expected(weightsOf[model] as string, rows));
      answered.set(model, a.headers.get('x-modelmux-replica'));
    }
    // Once the router has read the tables, a version is sent where it is loaded, every time.
    for (const [model, replica] of answered) {
      expect(await loaded(replicaNamed(replica) as ReplicaProcess)).toContain(model);
      const [id, v] = model.split('@');
      const ask = (): Promise<Answer> => post(`${rt.url}/wine/v2/models/${id}${v === undefined ? '' : `/versions/${v}`}/infer`, v2Body(rows));
      await eventually(async () => expect((await ask()).headers.get('x-modelmux-cache')).toBe('hit'), 5000, 25);
      for (let i = 0; i < 5; i++) {
        const a = await ask();
        expect(a.headers.get('x-modelmux-cache')).toBe('hit');
        expect(await loaded(replicaNamed(a.headers.get('x-modelmux-replica')) as ReplicaProcess)).toContain(model);
        expectClose(v2Outputs(a), expected(weightsOf[model] as string, rows));
      }
    }
    const index = (await post(`${rt.adminUrl}/wine/v2/repository/index`, { ready: true })).body as unknown as { name: string; version?: string }[];
    // Version 10 was loaded by its metadata test: every loaded version, the default one first.
    expect(index.filter((e) => e.name === 'wine-7').map((e) => e.version ?? 'default')).toEqual(['default', '1', '2', '10']);
  });

  it('swaps in a version uploaded again under the same name, each answer all old or all new, other versions untouched', async () => {
    const r = rs[0] as ReplicaProcess;
    const ask = (path: string): Promise<Answer> => post(`${r.url}/v2/models/${path}/infer`, v2Body(rows));
    const old = v2Outputs(await ask('wine-7/versions/2'));
    const fresh = expected('wine-7@2-new', rows);
    let stop = false;
    const samples: { start: number; end: number; status: number; out: number[] }[] = [];
    const load = Promise.all(
      Array.from({ length: 3 }, async () => {
        while (!stop) {
          const start = performance.now();
          const a = await ask('wine-7/versions/2');
          samples.push({ start, end: performance.now(), status: a.status, out: a.status === 200 ? v2Outputs(a) : [] });
        }
      }),
    );
    // The load answers before the upload, so the switch is seen from the old side.
    await eventually(() => expect(samples.length).toBeGreaterThan(0), 5000, 10);
    await s3.put('store/wine-7/2/model.onnx', wineModelBytes('wine-7@2-new'));
    const putAt = performance.now();
    const isNew = (out: number[]): boolean => out.length === fresh.length && out.every((v, i) => Math.abs(v - (fresh[i] ?? NaN)) < 1e-3 * Math.max(1, Math.abs(fresh[i] ?? 0)));
    const deadline = putAt + REVALIDATE_MS + SWAP_SLACK_MS;
    let firstNew: number | undefined;
    while (performance.now() < deadline && (firstNew === undefined || performance.now() < firstNew + 500)) {
      await sleep(50);
      firstNew ??= samples.find((s) => isNew(s.out))?.end;
    }
    stop = true;
    await load;

    expect(samples.filter((s) => s.status !== 200)).toEqual([]);
    expect(firstNew).toBeDefined();
    // Every answer is one version's, whole: the old weights or the new.
    expect(samples.filter((s) => s.out.join() !== old.join() && !isNew(s.out))).toEqual([]);
    expect(samples.filter((s) => s.start > (firstNew ?? Infinity) && !isNew(s.out))).toEqual([]);
    // The default version and version 1 are other models: not reloaded, not changed.
    expectClose(v2Outputs(await ask('wine-7')), expected('wine-7', rows));
    expectClose(v2Outputs(await ask('wine-7/versions/1')), expected('wine-7@1', rows));
    expect((await r.metrics()).get('modelmux_replica_model_swaps_total{result="success"}')).toBe(1);
  });
});

describe('model versions in a file:// store (local mode)', () => {
  let dir: string;
  let r: ReplicaProcess;
  const modelBytes = wineModelBytes('wine-7').length;

  beforeAll(async () => {
    dir = await wineModelFolder('modelmux-versions-', ['wine-7']);
    for (const v of ['1', '2']) {
      await mkdir(join(dir, 'wine-7', v));
      await writeFile(join(dir, 'wine-7', v, 'model.onnx'), wineModelBytes(`wine-7@${v}`));
    }
    // Room for one model: the default version's size must not count the version folders below it.
    r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-model-bytes', String(Math.floor(modelBytes * 1.5))] });
  });

  afterAll(async () => {
    await r?.stop(5000);
    await rm(dir, { recursive: true, force: true });
  });

  it('serves the same layout, each version with its own weights, and lists the versions', async () => {
    for (const [model, path] of [
      ['wine-7', 'wine-7'],
      ['wine-7@1', 'wine-7/versions/1'],
      ['wine-7@2', 'wine-7/versions/2'],
    ] as const) {
      const a = await post(`${r.url}/v2/models/${path}/infer`, v2Body(rows));
      expect([a.status, a.body.error]).toEqual([200, undefined]);
      expectClose(v2Outputs(a), expected(model, rows));
    }
    expect((await get(`${r.url}/v2/models/wine-7`)).body).toMatchObject({ name: 'wine-7', versions: ['1', '2'] });
  });
});
