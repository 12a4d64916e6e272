import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { tarGz } from '../../common/tar-gz.js';
import { SAMPLE_WINE, wineForward, wineModelBytes, wineWeights } from '../../common/wine-model.js';
import { startLocal, type LocalProcess } from '../helpers/local-process.js';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';
import { v2Body } from '../../harness/wine-requests.js';

const run = promisify(execFile);
const MAIN = join(process.cwd(), 'dist/cli/main.js');
const INVOKE = join(process.cwd(), 'test/fixtures/sagemaker_invoke.py');
/** The seed article's store: a thousand copies of one model.tar.gz. */
const ARCHIVES = 1000;

/** One InvokeEndpoint call of test/fixtures/sagemaker_invoke.py. */
interface Call {
  endpoint: string;
  target?: string;
  body?: string;
  content_type?: string;
  accept?: string;
  custom_attributes?: string;
  inference_id?: string;
}
type Outcome =
  | { ok: { body: string; content_type: string; variant: string; custom_attributes: string | null } }
  | { error: { type: string; raised: string; status: number; message: string; original_status: number | null; original_message: string | null } };

/** The bin folder of the pinned boto3 + Locust venv (test/tools/install-sagemaker-clients.sh). */
async function clientsBin(): Promise<string> {
  const { stdout } = await run('bash', [join(process.cwd(), 'test/tools/install-sagemaker-clients.sh')], { maxBuffer: 16 * 1024 * 1024, timeout: 15 * 60 * 1000 });
  const bin = stdout.trim().split('\n').pop();
  if (!bin) throw new Error('install-sagemaker-clients.sh printed no path');
  return bin;
}

const ROW = JSON.stringify({ instances: [SAMPLE_WINE] });
/** Every archive is a copy of the one holding model wine-0. */
const EXPECTED = wineForward(wineWeights('wine-0'), [SAMPLE_WINE])[0] ?? NaN;
/** Archives by keys with slashes, as MME allows; each holds a model of its own weights (named by its key). */
const NESTED = ['tenant/7/model.tar.gz', 'tenant/8/model.tar.gz', 'eu/west/1/m.tgz'];
const expectedOf = (key: string): number => wineForward(wineWeights(key), [SAMPLE_WINE])[0] ?? NaN;

describe('the SageMaker runtime API, driven by boto3 against a local pool over 1,000 model.tar.gz archives in S3', () => {
  let s3: S3Server;
  let local: LocalProcess | undefined;
  let bin: string;

  /** The router's root URL: the pool's route without its prefix. */
  const root = (): string => (local?.route() ?? '').replace(/\/wine$/, '');
  async function invoke(endpointUrl: string, calls: readonly Call[]): Promise<Outcome[]> {
    const { stdout } = await run(join(bin, 'python'), [INVOKE, endpointUrl, JSON.stringify(calls)], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 });
    return JSON.parse(stdout) as Outcome[];
  }
  const prediction = (o: Outcome | undefined): number => (o !== undefined && 'ok' in o ? (JSON.parse(o.ok.body) as { predictions: number[][] }).predictions[0]?.[0] : undefined) ?? NaN;

  beforeAll(async () => {
    bin = await clientsBin();
    s3 = await startS3Server();
    const env = { ...process.env, ...s3.awsEnv, MODELMUX_S3_ENDPOINT: s3.endpoint };
    await run(process.execPath, [MAIN, 'models', '--out', `s3://${s3.bucket}/mme`, '--count', String(ARCHIVES), '--archives'], { env });
    await s3.put('mme/broken.tar.gz', new TextEncoder().encode('not a gzip stream'));
    for (const key of NESTED) await s3.put(`mme/${key}`, await tarGz([{ name: 'model.onnx', body: wineModelBytes(key) }]));
    await s3.put('mme/escape.tar.gz', await tarGz([{ name: '../model.onnx', body: wineModelBytes('wine-0') }]));
    local = await startLocal(['--port', '0', '--replicas', '2', '--model-source', `s3://${s3.bucket}/mme`], env, 150_000);
  }, 900_000);

  afterAll(async () => {
    await local?.stop();
    await s3?.stop();
  }, 60_000);

  it("answers invoke_endpoint at the router's root with the model's answer, for archives across the whole store", async () => {
    const targets = Array.from({ length: 20 }, (_, k) => `wine-${k * 50 + (k % 7)}.tar.gz`);
    const out = await invoke(
      root(),
      targets.map((target) => ({ endpoint: 'wine', target, body: ROW, accept: 'application/json' })),
    );
    expect(out.map((o) => ('ok' in o ? 'ok' : o.error.message))).toEqual(targets.map(() => 'ok'));
    for (const o of out) expect(prediction(o)).toBeCloseTo(EXPECTED, 4);
  }, 120_000);

  it("answers under the pool's prefix too, with SageMaker's response headers and the custom attributes echoed", async () => {
    const [o] = await invoke(local?.route() ?? '', [{ endpoint: 'wine', target: 'wine-999.tar.gz', body: ROW, custom_attributes: 'trace=42', inference_id: 'inference-7' }]);
    expect(o !== undefined && 'ok' in o ? { variant: o.ok.variant, custom_attributes: o.ok.custom_attributes } : o).toEqual({ variant: 'AllTraffic', custom_attributes: 'trace=42' });
    // The content type is the model's own, passed on as SageMaker passes a container's.
    expect(o !== undefined && 'ok' in o ? o.ok.content_type : '').toMatch(/^application\/json/);
    expect(prediction(o)).toBeCloseTo(EXPECTED, 4);
  }, 60_000);

  it('refuses a missing TargetModel, a traversal attempt, an unknown endpoint and a model not in the store with ValidationError', async () => {
    const out = await invoke(root(), [
      { endpoint: 'wine', body: ROW },
      { endpoint: 'wine', target: '../mme/wine-1.tar.gz', body: ROW },
      { endpoint: 'iris', target: 'wine-1.tar.gz', body: ROW },
      { endpoint: 'wine', target: 'wine-1000.tar.gz', body: ROW },
    ]);
    expect(out.map((o) => ('error' in o ? [o.error.raised, o.error.status] : 'ok'))).toEqual([
      ['ValidationError', 400],
      ['ValidationError', 400],
      ['ValidationError', 400],
      ['ValidationError', 400],
    ]);
    const messages = out.map((o) => ('error' in o ? o.error.message : ''));
    expect(messages[0]).toContain('X-Amzn-SageMaker-Target-Model');
    expect(messages[1]).toContain('invalid_model_id');
    expect(messages[3]).toContain('model_not_found');
  }, 60_000);

  it('answers invoke_endpoint for archives whose keys hold slashes, each with its own model', async () => {
    const targets = [...NESTED, 'tenant/7/model.tar.gz'];
    const out = await invoke(
      root(),
      targets.map((target) => ({ endpoint: 'wine', target, body: ROW })),
    );
    expect(out.map((o) => ('ok' in o ? 'ok' : o.error.message))).toEqual(targets.map(() => 'ok'));
    out.forEach((o, i) => expect(prediction(o)).toBeCloseTo(expectedOf(targets[i] ?? ''), 4));
    // Different weights per key: the answers tell the models apart.
    expect(prediction(out[0])).not.toBeCloseTo(prediction(out[1]), 4);
  }, 60_000);

  it("serves the same keys by the container-side POST /invocations and by the V2 path with the key's slashes as %2F", async () => {
    const invocation = await fetch(`${local?.route() ?? ''}/invocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-amzn-sagemaker-target-model': 'tenant/8/model.tar.gz' },
      body: ROW,
    });
    const predicted = (await invocation.json()) as { predictions?: number[][] };
    expect(predicted.predictions?.[0]?.[0]).toBeCloseTo(expectedOf('tenant/8/model.tar.gz'), 4);
    const v2 = await fetch(`${local?.route() ?? ''}/v2/models/eu%2Fwest%2F1%2Fm.tgz/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(v2Body([[...SAMPLE_WINE]])),
    });
    const answered = (await v2.json()) as { model_name?: string; outputs?: { data: number[] }[] };
    expect(answered.model_name).toBe('eu/west/1/m.tgz');
    expect(answered.outputs?.[0]?.data[0]).toBeCloseTo(expectedOf('eu/west/1/m.tgz'), 4);
  }, 60_000);

  it('refuses a TargetModel whose slashes would leave the store prefix or name no archive with ValidationError, saying why', async () => {
    const targets = ['tenant/../x.tar.gz', '/abs.tar.gz', 'a//b.tar.gz', 'tenant/7/model'];
    const out = await invoke(
      root(),
      targets.map((target) => ({ endpoint: 'wine', target, body: ROW })),
    );
    expect(out.map((o) => ('error' in o ? [o.error.raised, o.error.status] : 'ok'))).toEqual(targets.map(() => ['ValidationError', 400]));
    const messages = out.map((o) => ('error' in o ? o.error.message : ''));
    expect(messages).toEqual([expect.stringContaining('".."'), expect.stringContaining('start or end with "/"'), expect.stringContaining('"//"'), expect.stringContaining('only an archive key')]);
  }, 60_000);

  it("refuses a call whose endpoint name is not the prefix's under that prefix, rather than serve another pool", async () => {
    const [o] = await invoke(local?.route() ?? '', [{ endpoint: 'iris', target: 'wine-1.tar.gz', body: ROW }]);
    expect(o !== undefined && 'error' in o ? [o.error.raised, o.error.message] : o).toEqual(['ValidationError', expect.stringContaining('/endpoints/iris/invocations')]);
  }, 60_000);

  it("answers what the model refused, and a broken or hostile archive, with ModelError carrying the model's status and message", async () => {
    const out = await invoke(root(), [
      { endpoint: 'wine', target: 'wine-3.tar.gz', body: JSON.stringify({ instances: [[1, 2, 3]] }) },
      { endpoint: 'wine', target: 'broken.tar.gz', body: ROW },
      { endpoint: 'wine', target: 'escape.tar.gz', body: ROW },
    ]);
    const errors = out.map((o) => ('error' in o ? o.error : undefined));
    expect(errors.map((e) => [e?.raised, e?.status, e?.original_status])).toEqual([
      ['ModelError', 424, 400],
      ['ModelError', 424, 422],
      ['ModelError', 424, 422],
    ]);
    const original = (i: number): { error?: string; message?: string } => JSON.parse(errors[i]?.original_message ?? '{}') as { error?: string; message?: string };
    expect([original(0).error, original(1).error, original(2).error]).toEqual(['input_mismatch', 'archive_invalid', 'archive_invalid']);
    expect(original(1).message).toContain('not a readable gzip-compressed tar');
    expect(original(2).message).toContain('climbs out');
  }, 60_000);

  it('answers ServiceUnavailable when the store cannot be reached for a model not yet on the replicas', async () => {
    await s3.stop();
    const [o] = await invoke(root(), [{ endpoint: 'wine', target: 'wine-500.tar.gz', body: ROW }]);
    expect(o !== undefined && 'error' in o ? [o.error.raised, o.error.status] : o).toEqual(['ServiceUnavailable', 503]);
  }, 60_000);
});
