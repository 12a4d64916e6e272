import { jest } from '@jest/globals';
import { status } from '@grpc/grpc-js';
import { mkdtempSync, readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { eventually } from '../../../harness/eventually.js';
import { linearModel } from '../../helpers/composite-models.js';
import { writeModel } from '../../helpers/datatype-models.js';
import { RawClient } from '../../helpers/raw-http-client.js';
import { inferenceClientFor, type GrpcAnswer, type InferenceClient } from '../../helpers/grpc-client.js';
import { ERROR_CODE_TRAILER, type ModelInferResponse } from '../../../common/grpc/inference-service.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { post } from '../replica/wine-fixtures.js';

jest.setTimeout(120_000);

/**
 * The bounds of ensemble and sequence requests (ADR 0041), against a real router and two real
 * replicas: one client request's member requests, in all and at once; a client's composite
 * requests and the bytes they hold; the body a composite takes; and the tensor work kept off the
 * router's event loop.
 */

const W = [1, 0, 0, 1, 1, 1];
const B = [0, 1];
/** Models that hold each request this long before they answer (a dynamic batch that never fills), using no CPU. */
const NEST_MS = 600;
const HOLD_MS = 3000;

/** The tight bounds of the first router. */
const IN_FLIGHT = 2;
const MEMBER_REQUESTS = 12;
const PER_CLIENT = 2;
const SHARE = 3_500_000;
const BUDGET = 6_000_000;
const COMPOSITE_BODY = 1_150_000;
/** A body of this size with tiny tensors: the answers stay small, so the bytes held are the bodies. */
const PADDED = 1_000_000;

function ensemble(name: string, members: string[]): unknown {
  return {
    apiVersion: 'modelmux.io/v1alpha1',
    kind: 'ModelRoute',
    metadata: { name },
    spec: { deploymentRef: { name: 'comp' }, ensemble: { members: members.map((model) => ({ model })), combine: 'mean', outputs: ['y'] } },
  };
}

const ROUTES = [
  ensemble('avg', ['a', 'b', 'c']),
  ...[1, 2, 3].map((i) => ensemble(`e-slow-${i}`, ['slow-1', 'slow-2', 'slow-3'])),
  // 3 member requests, and 3 more for each of them: 12.
  ensemble('nest', ['e-slow-1', 'e-slow-2', 'e-slow-3']),
  ...[1, 2, 3, 4].map((i) => ensemble(`e${i}`, ['a', 'b', 'c'])),
  // 4 + 4 × 3 = 16 member requests.
  ensemble('too-wide', ['e1', 'e2', 'e3', 'e4']),
  ensemble('hold-pair', ['hold-1', 'hold-2']),
];

const x = (rows: number): unknown => ({ name: 'x', shape: [rows, 3], datatype: 'FP32', data: Array.from({ length: rows * 3 }, (_, i) => (i % 7) + 0.5) });

/** A request of `bytes` bytes, most of them a request parameter the models ignore. */
function padded(bytes: number): string {
  const head = JSON.stringify({ inputs: [x(2)], parameters: { pad: '' } });
  return head.replace('"pad":""', `"pad":"${'p'.repeat(bytes - head.length)}"`);
}

let dir: string;
let rs: ReplicaProcess[];
let rt: RouterProcess;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'modelmux-composite-bounds-'));
  for (const id of ['a', 'b', 'c']) writeModel(dir, id, linearModel(W, B));
  for (const [id, ms] of [...[1, 2, 3].map((i) => [`slow-${i}`, NEST_MS] as const), ['hold-1', HOLD_MS] as const, ['hold-2', HOLD_MS] as const]) {
    const slow = writeModel(dir, id, linearModel(W, B));
    await writeFile(join(slow, 'config.json'), JSON.stringify({ dynamicBatching: { maxBatchSize: 1024, batchWaitMs: ms } }));
  }
  const routesFile = join(dir, 'routes.yaml');
  await writeFile(routesFile, ROUTES.map((r) => JSON.stringify(r)).join('\n---\n'));
  rs = await Promise.all([0, 1].map(() => startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '16'] })));
  rt = await startRouter([
    '--routes',
    `/comp=${rs.map((r) => r.url).join(',')}`,
    '--routes-file',
    routesFile,
    '--poll-interval-ms',
    '200',
    // The held members answer after seconds: no try is given up for another replica meanwhile.
    '--try-timeout-floor-ms',
    '20000',
    '--composite-max-members-in-flight',
    String(IN_FLIGHT),
    '--composite-max-member-requests',
    String(MEMBER_REQUESTS),
    '--composite-max-in-flight-per-client',
    String(PER_CLIENT),
    '--composite-max-bytes-per-client',
    String(SHARE),
    '--composite-max-body-bytes',
    String(COMPOSITE_BODY),
    '--max-buffered-bytes',
    String(BUDGET),
  ]);
  // Every model loaded on both replicas, so no load runs during a test.
  for (let i = 0; i < 4; i++) await Promise.all(['a', 'b', 'c'].map((m) => infer(m)));
});

afterAll(async () => {
  await rt?.stop(5000);
  await Promise.all((rs ?? []).map((r) => r.stop(5000)));
  await rm(dir, { recursive: true, force: true });
});

function infer(model: string, body: unknown = { inputs: [x(2)] }, router: RouterProcess = rt): ReturnType<typeof post> {
  return post(`${router.url}/comp/v2/models/${model}/infer`, body, {});
}

/** Requests in progress at both replicas now: the replica slots held. */
async function atReplicas(): Promise<number> {
  const all = await Promise.all(rs.map((r) => r.metrics()));
  return all.reduce((n, m) => n + (m.get('modelmux_replica_ongoing_requests') ?? 0), 0);
}

/** A request for `model` sent from the local address `from` (each address is another client). */
function postFrom(from: string, model: string, body: string): RawClient {
  const head = `POST /comp/v2/models/${model}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
  return new RawClient(rt.port, { localAddress: from }).send(head).send(body);
}

async function answerOf(c: RawClient): Promise<{ status: number; head: string; body: Record<string, unknown> }> {
  await c.until((r) => r.responses() > 0 && /\r\n\r\n[\s\S]*[}\]]$/.test(r.text), 20_000);
  const headEnd = c.text.indexOf('\r\n\r\n');
  return { status: Number(c.text.slice(9, 12)), head: c.text.slice(0, headEnd), body: c.json() as Record<string, unknown> };
}

describe('one client request', () => {
  it('holds at most --composite-max-members-in-flight replica slots through nested ensembles, the other members waiting their turn', async () => {
    expect(await atReplicas()).toBe(0);
    let most = 0;
    let done = false;
    const answer = infer('nest').finally(() => {
      done = true;
    });
    while (!done) most = Math.max(most, await atReplicas());
    const a = await answer;
    expect(a.status).toBe(200);
    expect(a.headers.get('x-modelmux-members')).toBe('e-slow-1,e-slow-2,e-slow-3');
    // Nine held members, never more than two at the replicas at once, and two at a time.
    expect(most).toBe(IN_FLIGHT);
  });

  it('is refused 502 composite_member_limit past --composite-max-member-requests at every level, having sent no more than that', async () => {
    const a = await infer('too-wide');
    expect(a.status).toBe(502);
    expect(a.body.error).toBe('composite_member_limit');
    expect(a.body.message).toMatch(/more than 12 member requests .*--composite-max-member-requests/);
    const id = a.headers.get('x-request-id');
    await eventually(() => expect(rt.logLines()).toContainEqual(expect.objectContaining({ msg: 'request', requestId: id, model: 'too-wide' })), 10_000, 25);
    const members = rt.logLines().filter((l) => l['msg'] === 'request' && l['requestId'] === id && l['model'] !== 'too-wide');
    expect(members.length).toBeLessThanOrEqual(MEMBER_REQUESTS);
  });

  it('takes a body up to --composite-max-body-bytes, 413 past it, while a plain model takes the same body', async () => {
    const body = padded(COMPOSITE_BODY + 100_000);
    const refused = await infer('avg', body);
    expect(refused.status).toBe(413);
    expect(refused.body.error).toBe('body_too_large');
    expect(refused.body.message).toMatch(/--composite-max-body-bytes/);
    expect((await infer('a', body)).status).toBe(200);
    const taken = await infer('avg', padded(COMPOSITE_BODY - 50_000));
    expect([taken.status, taken.body.message]).toEqual([200, undefined]);
  });
});

describe('one client', () => {
  it('is refused 429 composite_client_limit with Retry-After past --composite-max-in-flight-per-client, while another client is served', async () => {
    const held = [postFrom('127.0.0.2', 'hold-pair', JSON.stringify({ inputs: [x(2)] })), postFrom('127.0.0.2', 'hold-pair', JSON.stringify({ inputs: [x(2)] }))];
    await eventually(async () => expect(await atReplicas()).toBe(2 * IN_FLIGHT), 10_000, 25);
    const third = await answerOf(postFrom('127.0.0.2', 'avg', JSON.stringify({ inputs: [x(2)] })));
    expect(third.status).toBe(429);
    expect(third.head).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(third.body.error).toBe('composite_client_limit');
    expect(third.body.message).toMatch(/2 ensemble and sequence requests under way .*--composite-max-in-flight-per-client/);
    // Another address, meanwhile: a composite and a plain request.
    expect((await answerOf(postFrom('127.0.0.3', 'avg', JSON.stringify({ inputs: [x(2)] })))).status).toBe(200);
    expect((await answerOf(postFrom('127.0.0.3', 'a', JSON.stringify({ inputs: [x(2)] })))).status).toBe(200);
    for (const c of held) expect((await answerOf(c)).status).toBe(200);
  });

  it("cannot fill the router's byte budget: past its share its composite is refused, and another client's large body still fits", async () => {
    // One composite holds its body and a copy for each of its two members under way: 3 MB of a 3.5 MB share.
    const first = postFrom('127.0.0.4', 'hold-pair', padded(PADDED));
    await eventually(async () => expect(await atReplicas()).toBe(IN_FLIGHT), 10_000, 25);
    const second = await answerOf(postFrom('127.0.0.4', 'hold-pair', padded(PADDED)));
    expect(second.status).toBe(429);
    expect(second.body.error).toBe('composite_client_limit');
    expect(second.body.message).toMatch(/--composite-max-bytes-per-client/);
    // 3 MB held of a 6 MB budget: another client's 2.5 MB body is taken.
    const other = await answerOf(postFrom('127.0.0.5', 'a', padded(2_500_000)));
    expect(other.status).toBe(200);
    expect((await answerOf(first)).status).toBe(200);
    await eventually(async () => expect((await rt.metrics()).get('modelmux_router_buffered_bytes')).toBe(0), 10_000, 25);
  });
});

describe('gRPC calls', () => {
  /** A ModelInfer call of `model` from 127.0.0.1 (typed contents), its parameters padded by `pad` bytes. */
  const grpcInfer = (client: InferenceClient, model: string, pad = 0): Promise<GrpcAnswer<ModelInferResponse>> =>
    client.call<ModelInferResponse>('ModelInfer', {
      model_name: model,
      inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 3], contents: { fp32_contents: [0.5, 1.5, 2.5, 3.5, 4.5, 5.5] } }],
      ...(pad > 0 ? { parameters: { pad: { string_param: 'p'.repeat(pad) } } } : {}),
    });
  const failure = (a: GrpcAnswer<unknown>): unknown => (a.ok ? 'OK' : [a.code, a.trailers[ERROR_CODE_TRAILER]]);

  it("count among their client's composite requests with its HTTP ones: past --composite-max-in-flight-per-client a call is refused RESOURCE_EXHAUSTED composite_client_limit", async () => {
    const client = inferenceClientFor(rt.grpcAddress as string);
    try {
      // One held composite over HTTP and one over gRPC, both from 127.0.0.1, the gRPC client's address.
      const overHttp = postFrom('127.0.0.1', 'hold-pair', JSON.stringify({ inputs: [x(2)] }));
      const overGrpc = grpcInfer(client, 'hold-pair');
      await eventually(async () => expect(await atReplicas()).toBe(2 * IN_FLIGHT), 10_000, 25);
      const third = await grpcInfer(client, 'avg');
      expect(failure(third)).toEqual([status.RESOURCE_EXHAUSTED, 'composite_client_limit']);
      expect(third.ok ? '' : third.details).toMatch(/2 ensemble and sequence requests under way .*--composite-max-in-flight-per-client/);
      const fourth = await answerOf(postFrom('127.0.0.1', 'avg', JSON.stringify({ inputs: [x(2)] })));
      expect([fourth.status, fourth.body.error]).toEqual([429, 'composite_client_limit']);
      expect((await answerOf(overHttp)).status).toBe(200);
      expect(failure(await overGrpc)).toBe('OK');
      expect(failure(await grpcInfer(client, 'avg'))).toBe('OK');
    } finally {
      client.close();
    }
  });

  it('take a message up to --composite-max-body-bytes, RESOURCE_EXHAUSTED body_too_large past it', async () => {
    const client = inferenceClientFor(rt.grpcAddress as string, { 'grpc.max_send_message_length': 8 * 1024 * 1024 });
    try {
      const refused = await grpcInfer(client, 'avg', COMPOSITE_BODY + 100_000);
      expect(failure(refused)).toEqual([status.RESOURCE_EXHAUSTED, 'body_too_large']);
      expect(refused.ok ? '' : refused.details).toMatch(/--composite-max-body-bytes/);
      expect(failure(await grpcInfer(client, 'avg', COMPOSITE_BODY - 50_000))).toBe('OK');
    } finally {
      client.close();
    }
  });
});

describe('the tensor work', () => {
  let plainRouter: RouterProcess;

  beforeAll(async () => {
    plainRouter = await startRouter(['--routes', `/comp=${rs.map((r) => r.url).join(',')}`, '--routes-file', join(dir, 'routes.yaml'), '--poll-interval-ms', '200']);
  });

  afterAll(async () => {
    await plainRouter?.stop(5000);
  });

  /** CPU time (clock ticks) of the router's event-loop thread and of the whole process. */
  function cpuTicks(pid: number): { loop: number; all: number } {
    const ticks = (path: string): number => {
      const fields = readFileSync(path, 'utf8').split(') ')[1]?.split(' ') ?? [];
      return Number(fields[11]) + Number(fields[12]);
    };
    return { loop: ticks(`/proc/${pid}/task/${pid}/stat`), all: ticks(`/proc/${pid}/stat`) };
  }

  it("is done off the router's event loop: of the CPU that ensembles of 2 MB bodies cost the router, its event-loop thread spends less than half", async () => {
    const body = JSON.stringify({ inputs: [x(180_000)] });
    expect(body.length).toBeGreaterThan(2_000_000);
    expect((await infer('avg', body, plainRouter)).status).toBe(200);
    const before = cpuTicks(plainRouter.pid);
    for (let i = 0; i < 8; i++) expect((await infer('avg', body, plainRouter)).status).toBe(200);
    const after = cpuTicks(plainRouter.pid);
    const loop = after.loop - before.loop;
    const all = after.all - before.all;
    // Measured (2 cores): 14% with the worker thread, 81% when the event loop did the work.
    expect(all).toBeGreaterThan(0);
    expect(loop / all).toBeLessThan(0.5);
  });
});
