import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { wineModelBytes } from '../../../common/wine-model.js';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { expectClose, expected, get, post, predictions, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(120_000);

let s3: S3Server;
const replicas: ReplicaProcess[] = [];

async function replica(args: string[] = [], env: Record<string, string> = {}): Promise<ReplicaProcess> {
  const r = await startReplica({
    args: ['--model-source', `s3://${s3.bucket}/wine`, '--s3-endpoint', s3.endpoint, ...args],
    env: { ...s3.awsEnv, ...env },
  });
  replicas.push(r);
  return r;
}

async function upload(...ids: string[]): Promise<void> {
  for (const id of ids) await s3.put(`wine/${id}/model.onnx`, wineModelBytes(id));
}

const loaded = async (r: ReplicaProcess): Promise<string[]> => ((await get(`${r.url}/models`)).body.loaded as string[]).slice().sort();

beforeAll(async () => {
  s3 = await startS3Server();
  await upload('m1', 'm2', 'm3', 'm4', 'hot', 'slow', 'other', 'cold-a', 'cold-b', 'p', 'q', 'r1', 'disk-a', 'disk-b', 'w1', 'w2', 'n1', 'n2', 'n3', 'map-a', 'map-b', 'map-c');
  // The wine MLP's rows are independent: p and q say so, and are batched (docs/model-configuration.md).
  for (const id of ['p', 'q']) await s3.put(`wine/${id}/config.json`, new TextEncoder().encode('{"dynamicBatching":{}}'));
}, 600_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  await s3?.stop();
});

describe('replica over a real S3-compatible store', () => {
  it('answers with the known weights through the V2, Ray and SageMaker forms', async () => {
    const r = await replica();
    const rows = wineRows(3);
    const want = expected('r1', rows);

    const v2 = await post(`${r.url}/v2/models/r1/infer`, v2Body(rows));
    expect(v2.status).toBe(200);
    expect(v2.headers.get('x-modelmux-cache')).toBe('miss');
    expect(v2.body.model_name).toBe('r1');
    expectClose(v2Outputs(v2), want);

    const ray = await post(`${r.url}/`, v2Body(rows), { serve_multiplexed_model_id: 'r1' });
    expect(ray.status).toBe(200);
    expect(ray.headers.get('x-modelmux-cache')).toBe('hit');
    expectClose(v2Outputs(ray), want);

    const rayHyphen = await post(`${r.url}/`, rows, { 'serve-multiplexed-model-id': 'r1' });
    expect(rayHyphen.status).toBe(200);
    expectClose(predictions(rayHyphen), want);

    const sm = await post(`${r.url}/invocations`, { instances: rows }, { 'X-Amzn-SageMaker-Target-Model': 'r1' });
    expect(sm.status).toBe(200);
    expectClose(predictions(sm), want);

    const smV2 = await post(`${r.url}/invocations`, v2Body(rows), { 'X-Amzn-SageMaker-Target-Model': 'r1' });
    expectClose(v2Outputs(smV2), want);

    const oneRow = await post(`${r.url}/invocations`, rows[0], { 'X-Amzn-SageMaker-Target-Model': 'r1' });
    expect(oneRow.status).toBe(200);
    expectClose(predictions(oneRow), want.slice(0, 1));

    for (const a of [v2, ray, sm]) {
      expect(a.headers.get('x-modelmux-replica')).toBe(`127.0.0.1:${r.port}`);
      expect(Number(a.headers.get('x-modelmux-table-version'))).toBeGreaterThan(0);
      expect(a.headers.get('x-request-id')).toMatch(/.+/);
    }
    const echoed = await post(`${r.url}/v2/models/r1/infer`, v2Body(rows), { 'x-request-id': 'req-42' });
    expect(echoed.headers.get('x-request-id')).toBe('req-42');
    // The router's alphabet (common/request-id.ts): an id the router passed on is the replica's too.
    const traced = await post(`${r.url}/v2/models/r1/infer`, v2Body(rows), { 'x-request-id': 'trace@span=1+2' });
    expect(traced.headers.get('x-request-id')).toBe('trace@span=1+2');

    const meta = await get(`${r.url}/v2/models/r1`);
    expect(meta.body).toMatchObject({ name: 'r1', inputs: [{ name: 'features', datatype: 'FP32', shape: [-1, 11] }], outputs: [{ name: 'quality', datatype: 'FP32', shape: [-1, 1] }] });
    expect((await get(`${r.url}/v2/models/r1/ready`)).status).toBe(200);
    expect((await get(`${r.url}/v2/models/m4/ready`)).body).toEqual({ name: 'm4', ready: false });
  });

  it('speaks the binary tensor data extension that tritonclient uses by default', async () => {
    const r = await replica();
    const rows = wineRows(2, 7);
    const floats = Float32Array.from(rows.flat());
    const head = Buffer.from(
      JSON.stringify({ inputs: [{ name: 'features', shape: [2, 11], datatype: 'FP32', parameters: { binary_data_size: floats.byteLength } }], parameters: { binary_data_output: true } }),
    );
    const res = await fetch(`${r.url}/v2/models/r1/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(head.length) },
      body: Buffer.concat([head, Buffer.from(floats.buffer)]),
    });
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    const jsonLength = Number(res.headers.get('inference-header-content-length'));
    const json = JSON.parse(body.subarray(0, jsonLength).toString()) as { outputs: { name: string; shape: number[]; parameters: { binary_data_size: number } }[] };
    expect(json.outputs[0]).toMatchObject({ name: 'quality', shape: [2, 1], parameters: { binary_data_size: 8 } });
    const out = new Float32Array(Uint8Array.from(body.subarray(jsonLength)).buffer);
    expectClose(Array.from(out), expected('r1', rows));
  });

  it('with 3 slots, loading 1, 2, 3, using 1, then loading 4 evicts 2', async () => {
    const r = await replica(['--max-models', '3']);
    const rows = wineRows(1);
    for (const id of ['m1', 'm2', 'm3', 'm1']) expect((await post(`${r.url}/v2/models/${id}/infer`, v2Body(rows))).status).toBe(200);
    expect(await loaded(r)).toEqual(['m1', 'm2', 'm3']);
    const four = await post(`${r.url}/v2/models/m4/infer`, v2Body(rows));
    expectClose(v2Outputs(four), expected('m4', rows));
    expect(await loaded(r)).toEqual(['m1', 'm3', 'm4']);
    // Info lines reach stdout in batches, up to 50 ms after the event.
    await eventually(() => expect(r.logLines()).toContainEqual(expect.objectContaining({ msg: "Unloading model 'm2'." })), 10_000, 25);
    expect(
      r
        .logLines()
        .filter((l) => l.event === 'evict')
        .map((l) => l.model),
    ).toEqual(['m2']);
    const m = await r.metrics();
    expect(m.get('modelmux_replica_model_evictions_total')).toBe(1);
    expect(m.get('modelmux_replica_models_loaded')).toBe(3);
    await eventually(async () => expect((await r.metrics()).get('modelmux_replica_model_releases_total')).toBe(1), 10_000, 25);
  });

  it('loads a cold model once for fifty concurrent requests', async () => {
    // A slow load keeps the model cold while all fifty arrive.
    const r = await replica(['--max-ongoing-requests', '100', '--test-hooks', '--test-load-delay-ms', '1500']);
    const rows = wineRows(2, 5);
    const answers = await Promise.all(Array.from({ length: 50 }, () => post(`${r.url}/v2/models/hot/infer`, v2Body(rows))));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expectClose(v2Outputs(a), expected('hot', rows));
    }
    const m = await r.metrics();
    expect(m.get('modelmux_replica_model_loads_total{result="success"}')).toBe(1);
    expect(m.get('modelmux_replica_model_loads_total')).toBe(1);
    expect((m.get('modelmux_replica_cache_misses_total') ?? 0) + (m.get('modelmux_replica_cache_hits_total') ?? 0)).toBe(50);
    expect(m.get('modelmux_replica_cache_misses_total')).toBeGreaterThan(1);
    await eventually(() => expect(r.logLines()).toContainEqual(expect.objectContaining({ event: 'load-end', model: 'hot' })), 10_000, 25);
    // The load's start and end lines are out; a second load would have written its start first.
    expect(r.logLines().filter((l) => l.msg === "Loading model 'hot'.")).toHaveLength(1);
  });

  it('answers a request whose model is evicted while it runs, then releases the model', async () => {
    const r = await replica(['--max-models', '1', '--test-hooks']);
    const rows = wineRows(1, 3);
    const slow = post(`${r.url}/v2/models/slow/infer`, v2Body(rows), { 'x-modelmux-test-delay-ms': '1500' });
    await eventually(async () => expect(await loaded(r)).toContain('slow'), 10_000, 25);
    const other = await post(`${r.url}/v2/models/other/infer`, v2Body(rows));
    expect(other.status).toBe(200);
    expect(await loaded(r)).toEqual(['other']);
    await eventually(() => expect(r.logLines()).toContainEqual(expect.objectContaining({ msg: "Unloading model 'slow'.", inUse: 1 })), 10_000, 25);
    // Still in use: not released yet. Past the 50 ms batching of info lines, a release line
    // written by now would show.
    await sleep(200);
    expect(r.logLines().some((l) => l.event === 'release' && l.model === 'slow')).toBe(false);
    const answer = await slow;
    expect(answer.status).toBe(200);
    expectClose(v2Outputs(answer), expected('slow', rows));
    await eventually(() => expect(r.logLines()).toContainEqual(expect.objectContaining({ event: 'release', model: 'slow' })), 10_000, 25);
  });

  it('loads two different cold models at the same time', async () => {
    const r = await replica(['--test-hooks', '--test-load-delay-ms', '1000']);
    const rows = wineRows(1);
    const [a, b] = await Promise.all([post(`${r.url}/v2/models/cold-a/infer`, v2Body(rows)), post(`${r.url}/v2/models/cold-b/infer`, v2Body(rows))]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    const loadEvents = (): string[] =>
      r
        .logLines()
        .filter((l) => l.event === 'load-start' || l.event === 'load-end')
        .map((l) => `${String(l.event)} ${String(l.model)}`);
    await eventually(() => expect(loadEvents()).toHaveLength(4), 10_000, 25);
    const events = loadEvents();
    // Both loads started before either finished: they overlapped.
    expect(events.slice(0, 2).sort()).toEqual(['load-start cold-a', 'load-start cold-b']);
    expect(events.slice(2).sort()).toEqual(['load-end cold-a', 'load-end cold-b']);
  });

  it('batches requests per model only and gives each request its own rows', async () => {
    const r = await replica(['--max-batch-size', '4', '--batch-wait-ms', '1000']);
    // Warm both models so the batches form from requests only, not around a load.
    await post(`${r.url}/v2/models/p/infer`, v2Body(wineRows(1)));
    await post(`${r.url}/v2/models/q/infer`, v2Body(wineRows(1)));
    const before = await r.metrics();
    const jobs = [0, 1, 2, 3].flatMap((k) => [
      { id: 'p', rows: wineRows(k + 1, 10 * k) },
      { id: 'q', rows: wineRows(4 - k, 10 * k + 3) },
    ]);
    const answers = await Promise.all(jobs.map((j) => post(`${r.url}/v2/models/${j.id}/infer`, v2Body(j.rows))));
    answers.forEach((a, i) => {
      const j = jobs[i]!;
      expect(a.status).toBe(200);
      expectClose(v2Outputs(a), expected(j.id, j.rows));
    });
    const after = await r.metrics();
    const count = (after.get('modelmux_replica_batch_size_requests_count') ?? 0) - (before.get('modelmux_replica_batch_size_requests_count') ?? 0);
    const sum = (after.get('modelmux_replica_batch_size_requests_sum') ?? 0) - (before.get('modelmux_replica_batch_size_requests_sum') ?? 0);
    expect(count).toBe(2);
    expect(sum).toBe(8);
  });

  it('answers 422 for a corrupt model and tries it again on the next request', async () => {
    const r = await replica();
    await s3.put('wine/corrupt/model.onnx', new TextEncoder().encode('this is not an onnx model'));
    const rows = wineRows(1);
    const first = await post(`${r.url}/v2/models/corrupt/infer`, v2Body(rows));
    expect(first.status).toBe(422);
    expect(first.body.error).toBe('model_load_failed');
    const second = await post(`${r.url}/v2/models/corrupt/infer`, v2Body(rows));
    expect(second.status).toBe(422);
    expect((await r.metrics()).get('modelmux_replica_model_loads_total{result="failure"}')).toBe(2);
    expect(await loaded(r)).toEqual([]);
    await s3.put('wine/corrupt/model.onnx', wineModelBytes('corrupt'));
    const fixed = await post(`${r.url}/v2/models/corrupt/infer`, v2Body(rows));
    expect(fixed.status).toBe(200);
    expectClose(v2Outputs(fixed), expected('corrupt', rows));
  });

  it('reloads an evicted model from its disk cache, and downloads it again once the store changes it', async () => {
    const r = await replica(['--max-models', '1', '--revalidate-after-ms', '0']);
    const rows = wineRows(2);
    const ask = (id: string) => post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));
    const fetches = async (source: string): Promise<number | undefined> => (await r.metrics()).get(`modelmux_replica_model_fetches_total{source="${source}"}`);

    expect((await ask('disk-a')).status).toBe(200);
    expect((await ask('disk-b')).status).toBe(200);
    const reloaded = await ask('disk-a');
    expect(reloaded.headers.get('x-modelmux-cache')).toBe('miss');
    expectClose(v2Outputs(reloaded), expected('disk-a', rows));
    expect(await fetches('store')).toBe(2);
    expect(await fetches('disk')).toBe(1);
    expect((await r.metrics()).get('modelmux_replica_model_loads_total{result="success"}')).toBe(3);

    // A new version under the same key has another ETag: the disk copy is stale.
    await s3.put('wine/disk-a/model.onnx', wineModelBytes('disk-c'));
    await ask('disk-b');
    expectClose(v2Outputs(await ask('disk-a')), expected('disk-c', rows));
    expect(await fetches('store')).toBe(3);

    // Gone from the store: not served from disk either.
    await s3.client.send(new DeleteObjectCommand({ Bucket: s3.bucket, Key: 'wine/disk-a/model.onnx' }));
    await ask('disk-b');
    const gone = await ask('disk-a');
    expect(gone.status).toBe(404);
    expect(gone.body.error).toBe('model_not_found');
  });

  it('maps the weights of its downloads instead of reading them, and answers each model with its own through loads and evictions', async () => {
    const rows = wineRows(2);
    const cycle = async (r: ReplicaProcess): Promise<void> => {
      for (let round = 0; round < 2; round++) {
        for (const id of ['map-a', 'map-b', 'map-c']) {
          const a = await post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));
          expect(a.headers.get('x-modelmux-cache')).toBe('miss');
          expectClose(v2Outputs(a), expected(id, rows));
        }
      }
    };
    // One slot and LRU: every request loads, the first round from the store, the second from disk.
    const mapped = await replica(['--max-models', '1', '--cache-policy', 'lru']);
    await cycle(mapped);
    let m = await mapped.metrics();
    expect(m.get('modelmux_replica_model_opens_total{kind="shared_graph"}')).toBe(6);
    expect(m.get('modelmux_replica_mapped_loads_total')).toBe(6);
    expect(m.get('modelmux_replica_model_fetches_total{source="disk"}')).toBe(3);
    // The second round took back the first round's mappings, parked when each model was evicted.
    expect(m.get('modelmux_replica_mapping_reuses_total')).toBe(3);
    // The wine models' one-column head: their one-row runs take the single-row variant.
    expect(m.get('modelmux_replica_single_row_loads_total')).toBe(6);

    // A disk cache with room for one file (1.3 kB each): each download evicts the file before
    // it while that file's model is still loaded, so the model's mapping is let go when the
    // model is, not parked (there is room to park it): no mapping keeps a deleted file on disk.
    const small = await replica(['--max-models', '1', '--cache-policy', 'lru', '--disk-cache-bytes', '2000']);
    await cycle(small);
    m = await small.metrics();
    expect(m.get('modelmux_replica_mapped_loads_total')).toBe(6);
    expect(m.get('modelmux_replica_model_fetches_total{source="store"}')).toBe(6);
    expect(m.get('modelmux_replica_mapping_reuses_total') ?? 0).toBe(0);
    const maps = (await readFile(`/proc/${small.pid}/maps`, 'utf8')).split('\n').filter((l) => l.includes('.onnx'));
    expect(maps.length).toBeGreaterThan(0); // the loaded model's file
    expect(maps.filter((l) => l.includes('(deleted)'))).toEqual([]);

    const read = await replica(['--max-models', '1', '--cache-policy', 'lru', '--map-weights', 'false']);
    await cycle(read);
    m = await read.metrics();
    expect(m.get('modelmux_replica_model_opens_total{kind="shared_graph"}')).toBe(6);
    expect(m.get('modelmux_replica_mapped_loads_total') ?? 0).toBe(0);
  });

  it('reloads from disk without asking the store within the revalidation window', async () => {
    const r = await replica(['--max-models', '1', '--revalidate-after-ms', '600000']);
    const rows = wineRows(2);
    const ask = (id: string) => post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));
    await ask('w1');
    await ask('w2');
    await s3.put('wine/w1/model.onnx', wineModelBytes('w3'));
    // Confirmed by its download moments ago: the replica does not ask, so it keeps the old version.
    expectClose(v2Outputs(await ask('w1')), expected('w1', rows));
    expect((await r.metrics()).get('modelmux_replica_model_fetches_total{source="disk"}')).toBe(1);
  });
});

describe('replicas of one machine sharing a folder', () => {
  let shared: string;
  beforeAll(async () => {
    shared = await mkdtemp(join(tmpdir(), 'modelmux-shared-test-'));
  });
  afterAll(async () => {
    await rm(shared, { recursive: true, force: true });
  });

  const fetches = async (r: ReplicaProcess, source: string): Promise<number> => (await r.metrics()).get(`modelmux_replica_model_fetches_total{source="${source}"}`) ?? 0;

  it('link the download of a neighbour instead of downloading again, and keep it when the neighbour goes', async () => {
    const a = await replica(['--shared-cache-dir', shared]);
    const b = await replica(['--shared-cache-dir', shared, '--max-models', '1']);
    const rows = wineRows(2);
    const ask = (r: ReplicaProcess, id: string) => post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));

    expectClose(v2Outputs(await ask(a, 'n1')), expected('n1', rows));
    expect(await fetches(a, 'store')).toBe(1);
    const linked = await ask(b, 'n1');
    expect(linked.status).toBe(200);
    expectClose(v2Outputs(linked), expected('n1', rows));
    expect(await fetches(b, 'peer')).toBe(1);
    expect(await fetches(b, 'store')).toBe(0);

    // The owner exits and deletes its folder; b's link still holds the bytes for a reload.
    await a.stop();
    expect((await ask(b, 'n2')).status).toBe(200);
    const reloaded = await ask(b, 'n1');
    expect(reloaded.headers.get('x-modelmux-cache')).toBe('miss');
    expectClose(v2Outputs(reloaded), expected('n1', rows));
    expect(await fetches(b, 'disk')).toBe(1);
    expect(await fetches(b, 'store')).toBe(1); // n2 only
  });

  it('revalidate the file of a neighbour by ETag, and download a version the store has replaced', async () => {
    const a = await replica(['--shared-cache-dir', shared]);
    const rows = wineRows(2);
    expect((await post(`${a.url}/v2/models/n3/infer`, v2Body(rows))).status).toBe(200);
    await s3.put('wine/n3/model.onnx', wineModelBytes('n3-new'));

    const b = await replica(['--shared-cache-dir', shared, '--revalidate-after-ms', '0']);
    expectClose(v2Outputs(await post(`${b.url}/v2/models/n3/infer`, v2Body(rows))), expected('n3-new', rows));
    expect(await fetches(b, 'store')).toBe(1);
    expect(await fetches(b, 'peer')).toBe(0);

    // b's download is now the record: a third replica links it, after the store confirms it.
    const c = await replica(['--shared-cache-dir', shared, '--revalidate-after-ms', '0']);
    expectClose(v2Outputs(await post(`${c.url}/v2/models/n3/infer`, v2Body(rows))), expected('n3-new', rows));
    expect(await fetches(c, 'peer')).toBe(1);
    expect(await fetches(c, 'store')).toBe(0);
  });
});

describe('replica whose store goes away', () => {
  it('still reloads the models it has on disk, and answers 503 for the others', async () => {
    const own = await startS3Server();
    try {
      for (const id of ['k1', 'k2', 'k3']) await own.put(`wine/${id}/model.onnx`, wineModelBytes(id));
      const r = await startReplica({ args: ['--model-source', `s3://${own.bucket}/wine`, '--s3-endpoint', own.endpoint, '--max-models', '1', '--revalidate-after-ms', '0'], env: own.awsEnv });
      replicas.push(r);
      const rows = wineRows(1);
      const ask = (id: string) => post(`${r.url}/v2/models/${id}/infer`, v2Body(rows));
      expect((await ask('k1')).status).toBe(200);
      expect((await ask('k2')).status).toBe(200);
      await own.stop();
      const fromDisk = await ask('k1');
      expect(fromDisk.status).toBe(200);
      expectClose(v2Outputs(fromDisk), expected('k1', rows));
      expect((await r.metrics()).get('modelmux_replica_model_fetches_total{source="disk_unverified"}')).toBe(1);
      const never = await ask('k3');
      expect(never.status).toBe(503);
      expect(never.body.error).toBe('store_unavailable');
    } finally {
      await own.stop();
    }
  });
});
