import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { status } from '@grpc/grpc-js';
import type { ModelInferResponse } from '../../common/grpc/inference-service.js';
import { tarGz } from '../../common/tar-gz.js';
import { eventually } from '../../harness/eventually.js';
import { inferenceClientFor } from '../helpers/grpc-client.js';
import { startLocal, type LocalProcess } from '../helpers/local-process.js';
import { closeTo, firstOutput, mlserverBin, startMLServer, trainWineModels, v2Rows, type Expected, type MLServer } from '../helpers/mlserver.js';
import { startReplica, type ReplicaProcess } from '../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../harness/router-process.js';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';

/**
 * Sidecar mode against the real runtime: MLServer with its scikit-learn and XGBoost runtimes,
 * models trained here on generated wine data and kept in SeaweedFS in MLServer's layout, a
 * replica that loads them into MLServer through its repository API, and a router in front.
 */

const MODELS = ['sk-0:sklearn', 'sk-1:sklearn', 'xgb-0:xgboost', 'xgb-1:xgboost'];
const IDS = MODELS.map((m) => m.split(':')[0] as string);

let s3: S3Server;
let mlserver: MLServer;
let replica: ReplicaProcess;
let router: RouterProcess;
let work: string;
let expected: Record<string, Expected>;
let bin: string;

async function listFiles(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath, e.name)));
}

async function infer(id: string, rows: number[][]): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${router.url}/wine/v2/models/${id}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: v2Rows(rows) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** What the replica and MLServer said, for a failure a rerun may not show (a CI run once found MLServer not ready mid-test). */
async function explainFailure(): Promise<void> {
  const mlserverLog = await readFile(mlserver.logFile, 'utf8').catch((err: Error) => err.message);
  const tail = (text: string): string => text.split('\n').slice(-40).join('\n');
  process.stderr.write(`--- replica log (tail) ---\n${tail(replica.logs())}\n--- ${mlserver.logFile} (tail) ---\n${tail(mlserverLog)}\n`);
}

const predictions = firstOutput;

function expectClose(got: number[], want: number[]): void {
  expect({ got, closeToLibrary: closeTo(got, want) }).toEqual({ got, closeToLibrary: true });
}

const loads = async (): Promise<number> => (await replica.metrics()).get('modelmux_replica_model_loads_total{result="success"}') ?? 0;

async function runtimeIndex(): Promise<string[]> {
  const res = await fetch(`${mlserver.url}/v2/repository/index`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ready: true }) });
  return ((await res.json()) as { name: string }[]).map((m) => m.name).sort();
}

async function table(): Promise<{ loaded: string[]; loading: string[] }> {
  return (await (await fetch(`${replica.url}/models`)).json()) as { loaded: string[]; loading: string[] };
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'modelmux-sidecar-'));
  const [venvBin, store] = await Promise.all([mlserverBin(), startS3Server()]);
  bin = venvBin;
  s3 = store;
  const trained = join(work, 'trained');
  expected = await trainWineModels(bin, trained, MODELS);
  // A model MLServer must refuse: its settings name a file that is not a model.
  for (const path of await listFiles(trained)) await s3.put(`wine/${path}`, await readFile(join(trained, path)));
  await s3.put('wine/broken/model.joblib', new TextEncoder().encode('not a pickle'));
  await s3.put('wine/broken/model-settings.json', new TextEncoder().encode(JSON.stringify({ name: 'broken', implementation: 'mlserver_sklearn.SKLearnModel', parameters: { uri: './model.joblib' } })));
  mlserver = await startMLServer(bin, join(work, 'runtime'));
  replica = await startReplica({
    args: [
      '--model-source',
      `s3://${s3.bucket}/wine`,
      '--s3-endpoint',
      s3.endpoint,
      '--runtime-url',
      mlserver.url,
      '--runtime-models-dir',
      mlserver.modelsDir,
      '--runtime-poll-ms',
      '200',
      '--max-models',
      '2',
      '--cache-policy',
      'lru',
    ],
    env: s3.awsEnv,
  });
  router = await startRouter(['--routes', `/wine=${replica.url}`, '--poll-interval-ms', '200']);
}, 900_000);

afterAll(async () => {
  await router?.stop();
  await replica?.stop();
  await mlserver?.stop();
  await s3?.stop();
  if (work !== undefined) await rm(work, { recursive: true, force: true });
}, 60_000);

describe('replica in sidecar mode over MLServer', () => {
  it("serves scikit-learn and XGBoost models through the router with the library's own predictions, evicting past two", async () => {
    for (const id of IDS) {
      const want = expected[id] as Expected;
      const res = await infer(id, want.rows);
      if (res.status !== 200) await explainFailure();
      expect(res).toMatchObject({ status: 200, body: { model_name: id } });
      expectClose(predictions(res.body), want.predictions);
    }
    // Two fit: the last two stay, in the table, in MLServer and in the shared folder alike.
    expect((await table()).loaded.sort()).toEqual(['xgb-0', 'xgb-1']);
    await eventually(async () => expect(await runtimeIndex()).toEqual(['xgb-0', 'xgb-1']), 10_000);
    await eventually(async () => expect((await readdir(mlserver.modelsDir)).sort()).toEqual(['xgb-0', 'xgb-1']), 10_000);
    const metrics = await replica.metrics();
    expect(metrics.get('modelmux_replica_model_evictions_total')).toBe(2);
    expect(metrics.get('modelmux_replica_model_loads_total{result="success"}')).toBe(4);
  }, 120_000);

  it('loads a cold model once for many concurrent requests', async () => {
    const id = 'sk-0';
    expect((await table()).loaded).not.toContain(id);
    const before = await loads();
    const want = expected[id] as Expected;
    const answers = await Promise.all(Array.from({ length: 8 }, () => infer(id, want.rows)));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expectClose(predictions(a.body), want.predictions);
    }
    expect((await loads()) - before).toBe(1);
  }, 60_000);

  it('answers 422 model_load_failed for a model MLServer refuses, and does not keep it', async () => {
    for (let i = 0; i < 2; i++) {
      const res = await infer('broken', [[0]]);
      expect(res).toMatchObject({ status: 422, body: { error: 'model_load_failed' } });
    }
    expect((await table()).loaded).not.toContain('broken');
    expect(await readdir(mlserver.modelsDir)).not.toContain('broken');
    // Not cached: the second request asked MLServer again.
    expect(replica.logLines().filter((l) => l['event'] === 'load-failed' && l['model'] === 'broken')).toHaveLength(2);
  }, 60_000);

  it("serves a model.tar.gz of MLServer's layout, unpacked whole into MLServer's folder, with the library's predictions", async () => {
    // SageMaker's artifact of model sk-0: its folder as an archive, named by the archive's key.
    const settings = JSON.parse(await readFile(join(work, 'trained', 'sk-0', 'model-settings.json'), 'utf8')) as Record<string, unknown>;
    const archive = await tarGz([
      { name: 'model-settings.json', body: JSON.stringify({ ...settings, name: 'sk-0.tar.gz' }) },
      { name: 'model.joblib', body: await readFile(join(work, 'trained', 'sk-0', 'model.joblib')) },
    ]);
    await s3.put('wine/sk-0.tar.gz', archive);
    const want = expected['sk-0'] as Expected;
    const res = await infer('sk-0.tar.gz', want.rows);
    if (res.status !== 200) await explainFailure();
    expect(res.status).toBe(200);
    expectClose(predictions(res.body), want.predictions);
    expect((await listFiles(join(mlserver.modelsDir, 'sk-0.tar.gz'))).sort()).toEqual(['model-settings.json', 'model.joblib']);
  }, 60_000);

  it('is not ready and advertises nothing while MLServer is down, and serves again once it is back', async () => {
    expect((await table()).loaded.length).toBeGreaterThan(0);
    await mlserver.kill();
    await eventually(async () => {
      const ready = await fetch(`${replica.url}/v2/health/ready`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { error: string }).error).toBe('runtime_unavailable');
    }, 10_000);
    expect((await table()).loaded).toEqual([]);
    const refused = await fetch(`${replica.url}/v2/models/sk-1/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"inputs":[]}' });
    expect(refused.status).toBe(503);

    await mlserver.start();
    await eventually(async () => expect((await fetch(`${replica.url}/v2/health/ready`)).status).toBe(200), 10_000);
    const want = expected['sk-1'] as Expected;
    const res = await eventually(async () => {
      const r = await infer('sk-1', want.rows);
      expect(r.status).toBe(200);
      return r;
    }, 15_000);
    expectClose(predictions(res.body), want.predictions);
  }, 120_000);

  it("serves the gRPC form through MLServer, typed and raw, with the library's predictions", async () => {
    const client = inferenceClientFor(replica.grpcAddress as string);
    try {
      const want = expected['sk-0'] as Expected;
      const shape = [want.rows.length, want.rows[0]?.length ?? 0];
      const typed = await client.call<ModelInferResponse>('ModelInfer', { model_name: 'sk-0', inputs: [{ name: 'wine', datatype: 'FP64', shape, contents: { fp64_contents: want.rows.flat() } }] });
      const raw = await client.call<ModelInferResponse>('ModelInfer', {
        model_name: 'sk-0',
        inputs: [{ name: 'wine', datatype: 'FP64', shape }],
        raw_input_contents: [Buffer.from(Float64Array.from(want.rows.flat()).buffer)],
      });
      if (!typed.ok || !raw.ok) throw new Error(JSON.stringify([typed, raw]));
      const output = typed.value.outputs[0]!;
      expect(raw.value.outputs[0]).toMatchObject({ name: output.name, datatype: output.datatype, shape: output.shape });
      expect(output.datatype).toBe('FP64');
      expectClose(output.contents?.fp64_contents ?? [], want.predictions);
      expectClose([...new Float64Array(new Uint8Array(raw.value.raw_output_contents[0]!).buffer)], want.predictions);
      const missing = await client.call('ModelInfer', { model_name: 'no-such-model', inputs: [] });
      expect(missing).toMatchObject({ ok: false, code: status.NOT_FOUND, trailers: { 'x-modelmux-error-code': 'model_not_found' } });
    } finally {
      client.close();
    }
  }, 60_000);

  it("serves the router's gRPC calls through MLServer over the replica's HTTP port, the route naming no gRPC port of the replica", async () => {
    // The route names the replica's HTTP port alone: only the router's HTTP/1.1 form of a call (ADR 0054) reaches it.
    const client = inferenceClientFor(router.grpcAddress as string);
    try {
      const want = expected['sk-0'] as Expected;
      const shape = [want.rows.length, want.rows[0]?.length ?? 0];
      const typed = await client.call<ModelInferResponse>('ModelInfer', { model_name: 'sk-0', inputs: [{ name: 'wine', datatype: 'FP64', shape, contents: { fp64_contents: want.rows.flat() } }] });
      if (!typed.ok) throw new Error(JSON.stringify(typed));
      expectClose(typed.value.outputs[0]?.contents?.fp64_contents ?? [], want.predictions);
    } finally {
      client.close();
    }
  }, 60_000);
});

describe('modelmux local --runtime', () => {
  let local: LocalProcess | undefined;

  afterAll(async () => {
    await local?.stop();
  }, 60_000);

  it('runs MLServer beside each replica, serves through it, and restarts it after a crash with an empty table', async () => {
    // MLServer reads its settings from MLSERVER_* variables; local mode hands it its ports and folder.
    const runtime = [
      'exec env MLSERVER_HOST=127.0.0.1 MLSERVER_HTTP_PORT=$MODELMUX_RUNTIME_PORT MLSERVER_GRPC_PORT=$MODELMUX_RUNTIME_GRPC_PORT',
      'MLSERVER_METRICS_PORT=$MODELMUX_RUNTIME_METRICS_PORT MLSERVER_LOAD_MODELS_AT_STARTUP=false MLSERVER_PARALLEL_WORKERS=0',
      `${join(bin, 'mlserver')} start "$MODELMUX_RUNTIME_MODELS_DIR"`,
    ].join(' ');
    const source = `file://${join(work, 'trained')}`;
    local = await startLocal(['--port', '0', '--replicas', '1', '--max-models', '2', '--model-source', source, '--runtime', runtime], { ...process.env, MODELMUX_RUNTIME_POLL_MS: '200' }, 120_000);
    const route = local.route();
    const post = async (id: string): Promise<{ status: number; body: Record<string, unknown> }> => {
      const want = expected[id] as Expected;
      const res = await fetch(`${route}/v2/models/${id}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: v2Rows(want.rows) });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    for (const id of ['sk-0', 'xgb-1']) {
      const res = await post(id);
      expect(res.status).toBe(200);
      expectClose(predictions(res.body), (expected[id] as Expected).predictions);
    }
    const [replicaUrl] = local.replicaUrls();
    const localTable = async (): Promise<string[]> => ((await (await fetch(`${replicaUrl}/models`)).json()) as { loaded: string[] }).loaded;
    expect((await localTable()).sort()).toEqual(['sk-0', 'xgb-1']);

    const started = local.lines().find((l) => l['msg'] === 'started runtime-0');
    process.kill(started?.['pid'] as number, 'SIGKILL');
    await eventually(async () => expect(await localTable()).toEqual([]), 10_000);
    // Restarted by local mode's supervision; the replica is ready again with it and loads anew.
    await eventually(() => expect(local?.lines().some((l) => l['msg'] === 'runtime-0 is ready again')).toBe(true), 60_000);
    const res = await eventually(async () => {
      const r = await post('xgb-1');
      expect(r.status).toBe(200);
      return r;
    }, 15_000);
    expectClose(predictions(res.body), (expected['xgb-1'] as Expected).predictions);
  }, 240_000);
});
