import { jest } from '@jest/globals';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request, type OutgoingHttpHeaders } from 'node:http';
import { pathToFileURL } from 'node:url';
import { wineModelBytes } from '../../../common/wine-model.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';
import { v2Body, wineRows } from '../replica/wine-fixtures.js';

jest.setTimeout(60_000);

let dir: string;
let replica: ReplicaProcess;
/** The router's two readers of client requests: its fast path, and node:http. */
const routers = new Map<string, RouterProcess>();

beforeAll(async () => {
  dir = await wineModelFolder('modelmux-grammar-', ['m1', 'm2']);
  // Version 1 of m1, the model m1@1 (docs/adr/0033-model-versions.md).
  await mkdir(join(dir, 'm1', '1'));
  await writeFile(join(dir, 'm1', '1', 'model.onnx'), wineModelBytes('m1@1'));
  replica = await startReplica({ args: ['--model-source', pathToFileURL(dir).href] });
  for (const [reader, args] of [
    ['fast path', []],
    ['node:http', ['--fast-path', 'false']],
  ] as const) {
    routers.set(reader, await startRouter(['--routes', `/wine=${replica.url}`, '--poll-interval-ms', '200', ...args]));
  }
});

afterAll(async () => {
  await Promise.all([...routers.values()].map((r) => r.stop()));
  await replica?.stop();
  await rm(dir, { recursive: true, force: true });
});

interface Reply {
  status: number;
  error: unknown;
  model: unknown;
  /** Set by the replica on every answer: absent when the router answered alone. */
  replica: string | undefined;
}

/** One request on its own connection, the path and headers sent as given (fetch would normalise both). */
function send(port: number, method: string, path: string, headers: OutgoingHttpHeaders, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        const json = (text === '' ? {} : JSON.parse(text)) as { error?: unknown; model_name?: string; model_version?: string };
        const from = res.headers['x-modelmux-replica'];
        const model = json.model_version === undefined ? json.model_name : `${String(json.model_name)}@${String(json.model_version)}`;
        resolve({ status: res.statusCode ?? 0, error: json.error, model, replica: typeof from === 'string' ? from : undefined });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const infer = JSON.stringify(v2Body(wineRows(1)));

describe.each(['fast path', 'node:http'])('router (%s) and replica read requests by one grammar', (reader) => {
  const router = (): RouterProcess => routers.get(reader) as RouterProcess;

  /** The same request to the router (under /wine) and to the replica directly. */
  async function both(method: string, path: string, headers: OutgoingHttpHeaders = {}, body?: string): Promise<{ router: Reply; replica: Reply }> {
    return { router: await send(router().port, method, `/wine${path}`, headers, body), replica: await send(replica.port, method, path, headers, body) };
  }

  it('serve the canonical spelling of every form alike', async () => {
    for (const [method, path, headers, model] of [
      ['POST', '/v2/models/m1/infer', {}, 'm1'],
      ['POST', '/v2/models/m1/versions/1/infer', {}, 'm1@1'],
      ['POST', '/v2/models/m1@1/infer', {}, 'm1@1'],
      ['POST', '/', { serve_multiplexed_model_id: 'm1' }, 'm1'],
      ['POST', '/', { 'serve-multiplexed-model-id': 'm1@1' }, 'm1@1'],
      ['POST', '/invocations', { 'x-amzn-sagemaker-target-model': 'm1' }, 'm1'],
    ] as const) {
      const { router: viaRouter, replica: direct } = await both(method, path, headers, infer);
      expect([path, viaRouter.status, viaRouter.model]).toEqual([path, 200, model]);
      expect([path, direct.status, direct.model]).toEqual([path, 200, model]);
    }
    const ready = await both('GET', '/v2/models/m1/versions/1/ready');
    expect([ready.router.status, ready.replica.status]).toEqual([200, 200]);
  });

  it.each([
    ['POST', '/V2/MODELS/m1/INFER', {}],
    ['POST', '/v2/models/m1/infer/', {}],
    ['POST', '/v2/models/m1//infer', {}],
    ['POST', '/invocations/', { 'x-amzn-sagemaker-target-model': 'm1' }],
    ['POST', '/INVOCATIONS', { 'x-amzn-sagemaker-target-model': 'm1' }],
    ['POST', '//', { serve_multiplexed_model_id: 'm1' }],
    ['GET', '/v2/models/m1/infer', {}],
    ['GET', '/', {}],
  ] as const)('refuse %s %s with 404 not_found on both sides, the router without asking a replica', async (method, path, headers) => {
    const { router: viaRouter, replica: direct } = await both(method, path, headers, method === 'POST' ? infer : undefined);
    expect([viaRouter.status, viaRouter.error, viaRouter.replica]).toEqual([404, 'not_found', undefined]);
    expect([direct.status, direct.error]).toEqual([404, 'not_found']);
  });

  it.each([
    ['the Ray form', '/', { serve_multiplexed_model_id: 'm1', 'serve-multiplexed-model-id': 'm1', connection: 'serve_multiplexed_model_id' }],
    ['the Ray form, its other spelling named', '/', { serve_multiplexed_model_id: 'm1', 'serve-multiplexed-model-id': 'm1', connection: 'keep-alive, Serve-Multiplexed-Model-Id' }],
    ['the SageMaker form', '/invocations', { 'x-amzn-sagemaker-target-model': 'm1', connection: 'x-amzn-sagemaker-target-model' }],
    ['the V2 form', '/v2/models/m1/infer', { serve_multiplexed_model_id: 'm2', connection: 'serve_multiplexed_model_id' }],
  ] as const)('refuse a model header named in Connection with 400 model_header_in_connection on both sides: %s', async (_form, path, headers) => {
    const { router: viaRouter, replica: direct } = await both('POST', path, headers, infer);
    expect([viaRouter.status, viaRouter.error, viaRouter.replica]).toEqual([400, 'model_header_in_connection', undefined]);
    expect([direct.status, direct.error]).toEqual([400, 'model_header_in_connection']);
  });

  it.each<[string, OutgoingHttpHeaders]>([
    ['two spellings naming different models', { serve_multiplexed_model_id: 'm1', 'serve-multiplexed-model-id': 'm2' }],
    ['one header given twice', { serve_multiplexed_model_id: ['m1', 'm2'] }],
  ])('refuse %s with 400 invalid_model_id on both sides', async (_case, headers) => {
    const { router: viaRouter, replica: direct } = await both('POST', '/', headers, infer);
    expect([viaRouter.status, viaRouter.error, viaRouter.replica]).toEqual([400, 'invalid_model_id', undefined]);
    expect([direct.status, direct.error]).toEqual([400, 'invalid_model_id']);
  });

  it.each([['/v2/models/m1/versions/latest/infer'], ['/v2/models/m1@1/versions/1/infer'], ['/v2/models/m1@x/infer']])(
    'refuse the malformed version of %s with 400 invalid_model_id on both sides, the router without asking a replica',
    async (path) => {
      const { router: viaRouter, replica: direct } = await both('POST', path, {}, infer);
      expect([viaRouter.status, viaRouter.error, viaRouter.replica]).toEqual([400, 'invalid_model_id', undefined]);
      expect([direct.status, direct.error]).toEqual([400, 'invalid_model_id']);
    },
  );

  it('passes bodies through unparsed: the replica behind refuses a deep one, and both stay up', async () => {
    const deep = `{"instances":${'['.repeat(5_000)}${']'.repeat(5_000)}}`;
    const a = await send(router().port, 'POST', '/wine/', { serve_multiplexed_model_id: 'm1' }, deep);
    expect([a.status, a.error, a.replica]).toEqual([400, 'invalid_request', `127.0.0.1:${replica.port}`]);
    expect((await send(router().port, 'GET', '/healthz', {})).status).toBe(200);
    expect((await send(router().port, 'POST', '/wine/v2/models/m2/infer', {}, infer)).model).toBe('m2');
  });
});
