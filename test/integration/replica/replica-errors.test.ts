import { jest } from '@jest/globals';
import { wineModelBytes } from '../../../common/wine-model.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { freePorts, startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { inFlightAt } from '../../helpers/in-flight.js';
import { get, post, v2Body, wineRows, type Answer } from './wine-fixtures.js';

jest.setTimeout(120_000);

let s3: S3Server;
let r: ReplicaProcess;
const others: ReplicaProcess[] = [];

async function replica(args: string[], env: Record<string, string> = {}): Promise<ReplicaProcess> {
  const p = await startReplica({ args: ['--model-source', `s3://${s3.bucket}/wine`, '--s3-endpoint', s3.endpoint, ...args], env: { ...s3.awsEnv, ...env } });
  others.push(p);
  return p;
}

function expectError(a: Answer, status: number, code: string, mentions?: string): void {
  expect({ status: a.status, error: a.body.error }).toEqual({ status, error: code });
  expect(typeof a.body.message).toBe('string');
  if (mentions !== undefined) expect(a.body.message).toContain(mentions);
}

beforeAll(async () => {
  s3 = await startS3Server();
  await s3.put('wine/ok/model.onnx', wineModelBytes('ok'));
  await s3.put('wine/big/model.onnx', wineModelBytes('big', 64));
  r = await replica(['--max-body-bytes', '4Ki', '--max-model-bytes', '2Ki']);
}, 600_000);

afterAll(async () => {
  await r?.stop();
  await Promise.all(others.map((p) => p.stop()));
  await s3?.stop();
});

describe('replica error answers', () => {
  const rows = wineRows(1);

  it('refuses malformed model ids with 400 invalid_model_id', async () => {
    expectError(await post(`${r.url}/v2/models/a..b/infer`, v2Body(rows)), 400, 'invalid_model_id');
    expectError(await post(`${r.url}/v2/models/a%2Fb/infer`, v2Body(rows)), 400, 'invalid_model_id');
    expectError(await post(`${r.url}/v2/models/${'x'.repeat(201)}/infer`, v2Body(rows)), 400, 'invalid_model_id');
    expectError(await post(`${r.url}/`, v2Body(rows), { serve_multiplexed_model_id: '../etc' }), 400, 'invalid_model_id');
    expectError(await post(`${r.url}/invocations`, v2Body(rows), { 'X-Amzn-SageMaker-Target-Model': 'a\tb' }), 400, 'invalid_model_id');
  });

  it('asks for a model id with 400 missing_model_id', async () => {
    expectError(await post(`${r.url}/`, v2Body(rows)), 400, 'missing_model_id');
    expectError(await post(`${r.url}/invocations`, v2Body(rows)), 400, 'missing_model_id');
  });

  it('names the input whose shape or datatype does not match with 400 input_mismatch', async () => {
    const wrongWidth = { inputs: [{ name: 'features', shape: [1, 10], datatype: 'FP32', data: rows[0]!.slice(0, 10) }] };
    expectError(await post(`${r.url}/v2/models/ok/infer`, wrongWidth), 400, 'input_mismatch', '"features"');
    const wrongType = { inputs: [{ name: 'features', shape: [1, 11], datatype: 'FP64', data: rows[0] }] };
    expectError(await post(`${r.url}/v2/models/ok/infer`, wrongType), 400, 'input_mismatch', 'FP32');
    const wrongName = { inputs: [{ name: 'colour', shape: [1, 11], datatype: 'FP32', data: rows[0] }] };
    expectError(await post(`${r.url}/v2/models/ok/infer`, wrongName), 400, 'input_mismatch', '"colour"');
    const wrongCount = { inputs: [{ name: 'features', shape: [2, 11], datatype: 'FP32', data: rows[0] }] };
    expectError(await post(`${r.url}/v2/models/ok/infer`, wrongCount), 400, 'input_mismatch', '"features"');
    expectError(await post(`${r.url}/invocations`, [[1, 2, 3]], { 'X-Amzn-SageMaker-Target-Model': 'ok' }), 400, 'input_mismatch', '"features"');
  });

  it('refuses bodies that are not inference requests with 400 invalid_request', async () => {
    expectError(await post(`${r.url}/v2/models/ok/infer`, '{"inputs": [ '), 400, 'invalid_request');
    expectError(await post(`${r.url}/v2/models/ok/infer`, { hello: 'world' }), 400, 'invalid_request');
    expectError(await post(`${r.url}/v2/models/ok/infer`, { inputs: [{ name: 'features', shape: [1, 11], datatype: 'FP32', data: [{}] }] }), 400, 'invalid_request');
    // A string is data (BYTES, "inf"), but not a number of this FP32 input.
    expectError(
      await post(`${r.url}/v2/models/ok/infer`, { inputs: [{ name: 'features', shape: [1, 11], datatype: 'FP32', data: ['a', ...rows[0]!.slice(1)] }] }),
      400,
      'input_mismatch',
      'the string "a", not a number',
    );
    expectError(await post(`${r.url}/`, [[1, 2], [1]], { serve_multiplexed_model_id: 'ok' }), 400, 'invalid_request');
  });

  it('refuses a body over the limit with 413 body_too_large', async () => {
    expectError(await post(`${r.url}/v2/models/ok/infer`, v2Body(wineRows(200))), 413, 'body_too_large');
  });

  it('answers 404 model_not_found for a model the store does not hold', async () => {
    expectError(await post(`${r.url}/v2/models/absent/infer`, v2Body(rows)), 404, 'model_not_found', 'absent');
    expectError(await get(`${r.url}/v2/models/absent`), 404, 'model_not_found');
  });

  it('answers 422 model_too_large for a model over the byte bound', async () => {
    expectError(await post(`${r.url}/v2/models/big/infer`, v2Body(rows)), 422, 'model_too_large');
  });

  it('answers 404 not_found for unknown paths', async () => {
    expectError(await get(`${r.url}/nowhere`), 404, 'not_found');
  });

  it('answers 503 store_unavailable when the store cannot be reached', async () => {
    const [closed] = await freePorts(1);
    const p = await startReplica({ args: ['--model-source', 's3://models/wine', '--s3-endpoint', `http://127.0.0.1:${closed}`], env: s3.awsEnv });
    others.push(p);
    expectError(await post(`${p.url}/v2/models/ok/infer`, v2Body(rows)), 503, 'store_unavailable');
    const badKeys = await replica([], { AWS_SECRET_ACCESS_KEY: 'wrong-secret' });
    expectError(await post(`${badKeys.url}/v2/models/ok/infer`, v2Body(rows)), 503, 'store_unavailable');
    expect(badKeys.logs()).not.toContain('wrong-secret');
  });

  it('answers 503 overloaded at once, with its header, past maxOngoingRequests', async () => {
    const p = await replica(['--max-ongoing-requests', '1', '--test-hooks']);
    const slow = post(`${p.url}/v2/models/ok/infer`, v2Body(rows), { 'x-modelmux-test-delay-ms': '1500' });
    await inFlightAt(p, 1);
    const refused = await post(`${p.url}/v2/models/ok/infer`, v2Body(rows));
    expectError(refused, 503, 'overloaded');
    expect(refused.headers.get('x-modelmux-overloaded')).toBe('true');
    expect((await slow).status).toBe(200);
    expect((await p.metrics()).get('modelmux_replica_overloaded_total')).toBe(1);
  });

  it('answers 504 timeout past the request deadline', async () => {
    const p = await replica(['--request-timeout-ms', '300', '--test-hooks']);
    expectError(await post(`${p.url}/v2/models/ok/infer`, v2Body(rows), { 'x-modelmux-test-delay-ms': '1000' }), 504, 'timeout');
  });

  it('is still serving after every bad request', async () => {
    const ok = await post(`${r.url}/v2/models/ok/infer`, v2Body(rows));
    expect(ok.status).toBe(200);
    expect((await get(`${r.url}/v2/health/live`)).status).toBe(200);
  });

  it('drains in-flight requests on SIGTERM and exits 0', async () => {
    const p = await replica(['--test-hooks']);
    const slow = post(`${p.url}/v2/models/ok/infer`, v2Body(rows), { 'x-modelmux-test-delay-ms': '1000' });
    await inFlightAt(p, 1);
    const code = p.stop(20_000);
    expect((await slow).status).toBe(200);
    expect(await code).toBe(0);
    expect(p.logLines().some((l) => l.event === 'stopped')).toBe(true);
  });
});
