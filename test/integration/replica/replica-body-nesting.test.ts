import { jest } from '@jest/globals';
import { rm } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';
import { get, post, v2Body, wineRows, type Answer } from './wine-fixtures.js';

jest.setTimeout(60_000);

let dir: string;
let r: ReplicaProcess;

beforeAll(async () => {
  dir = await wineModelFolder('modelmux-nesting-', ['ok']);
  r = await startReplica({ args: ['--model-source', pathToFileURL(dir).href] });
  // Loaded once, so each answer below is the body's cost alone.
  expect((await post(`${r.url}/v2/models/ok/infer`, v2Body(wineRows(1)))).status).toBe(200);
});

afterAll(async () => {
  await r?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** `answer`, or a failure once `ms` pass: a replica whose event loop stopped never answers. */
function within<T>(ms: number, answer: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms)));
  return Promise.race([answer, late]).finally(() => clearTimeout(timer));
}

const arrays = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
const v2Data = (data: string): string => `{"inputs":[{"name":"features","shape":[1,11],"datatype":"FP32","data":${data}}]}`;

/** Each form with its body: the V2 path, Ray's bare rows, SageMaker's instances. */
function forms(body: (depth: number) => { v2: string; rows: string }, depth: number): [string, Promise<Answer>][] {
  const b = body(depth);
  return [
    ['v2', post(`${r.url}/v2/models/ok/infer`, b.v2)],
    ['ray', post(`${r.url}/`, b.rows, { serve_multiplexed_model_id: 'ok' })],
    ['sagemaker', post(`${r.url}/invocations`, `{"instances":${b.rows}}`, { 'X-Amzn-SageMaker-Target-Model': 'ok' })],
  ];
}

const nested = (depth: number): { v2: string; rows: string } => ({ v2: v2Data(arrays(depth)), rows: arrays(depth) });

describe('replica bodies nested deep', () => {
  it('answers 30 nested arrays (a 60-byte body) with 400 at once in every form, and stays live', async () => {
    // These took time doubling with each level and stopped the event loop for good.
    expect(arrays(30)).toHaveLength(60);
    const answers = forms(nested, 30);
    const live = get(`${r.url}/v2/health/live`);
    for (const [form, answer] of answers) {
      const a = await within(10_000, answer);
      expect([form, a.status, a.body.error]).toEqual([form, 400, 'input_mismatch']);
    }
    expect((await within(10_000, live)).status).toBe(200);
  });

  it('answers a 10 KB body nested 5,000 deep with 400 invalid_request naming the limit in every form', async () => {
    expect(arrays(5_000)).toHaveLength(10_000);
    for (const [form, answer] of forms(nested, 5_000)) {
      const a = await answer;
      expect([form, a.status, a.body.error]).toEqual([form, 400, 'invalid_request']);
      expect(a.body.message).toContain('more than 40 deep');
    }
  });

  it('answers a body of the largest size that never closes its arrays with 400 invalid_request', async () => {
    const a = await post(`${r.url}/v2/models/ok/infer`, '['.repeat(8 * 1024 * 1024 - 1));
    expect([a.status, a.body.error]).toEqual([400, 'invalid_request']);
  });

  it('still serves rows and V2 data after the bombs, with the same replica', async () => {
    const rows = wineRows(2);
    expect((await post(`${r.url}/`, { instances: rows }, { serve_multiplexed_model_id: 'ok' })).status).toBe(200);
    expect((await post(`${r.url}/v2/models/ok/infer`, v2Body(rows))).status).toBe(200);
    expect((await get(`${r.url}/v2/health/ready`)).status).toBe(200);
  });
});
