import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { wineModelBytes } from '../../../common/wine-model.js';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { inFlightAt } from '../../helpers/in-flight.js';
import { expectClose, expected, get, post, v2Body, v2Outputs, wineRows, type Answer } from '../replica/wine-fixtures.js';

jest.setTimeout(180_000);

let s3: S3Server;
const started: { stop(graceMs?: number): Promise<number | null> }[] = [];
const MODELS = ['m1', 'm2', 'm3', 'hot', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'k1', 'k2', 'k3', 'k4', 'g1', 'g2'];

async function replicas(n: number, args: string[] = []): Promise<ReplicaProcess[]> {
  const out = await Promise.all(
    Array.from({ length: n }, () => startReplica({ args: ['--model-source', `s3://${s3.bucket}/wine`, '--s3-endpoint', s3.endpoint, '--max-models', '8', ...args], env: s3.awsEnv })),
  );
  started.push(...out);
  return out;
}

async function router(urls: readonly string[], args: string[] = []): Promise<RouterProcess> {
  const r = await startRouter(['--routes', `/wine=${urls.join(',')}`, '--poll-interval-ms', '200', ...args]);
  started.push(r);
  return r;
}

const replicaName = (r: ReplicaProcess): string => `127.0.0.1:${r.port}`;
const loads = async (r: ReplicaProcess): Promise<number> => (await r.metrics()).get('modelmux_replica_model_loads_total{result="success"}') ?? 0;
const totalLoads = async (rs: readonly ReplicaProcess[]): Promise<number> => (await Promise.all(rs.map(loads))).reduce((a, b) => a + b, 0);
function infer(base: string, model: string, headers: Record<string, string> = {}): Promise<Answer> {
  return post(`${base}/wine/v2/models/${model}/infer`, v2Body(wineRows(2)), headers);
}

beforeAll(async () => {
  s3 = await startS3Server();
  for (const id of MODELS) await s3.put(`wine/${id}/model.onnx`, wineModelBytes(id));
}, 600_000);

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop(5000)));
});

afterAll(async () => {
  await s3?.stop();
});

describe('router in front of three replica processes', () => {
  it('answers the V2, Ray and SageMaker forms from the replica that already holds the model', async () => {
    const rs = await replicas(3);
    const holder = rs[1] as ReplicaProcess;
    const warm = await post(`${holder.url}/v2/models/m1/infer`, v2Body(wineRows(2)));
    expect(warm.status).toBe(200);
    const rt = await router(rs.map((r) => r.url));
    const rows = wineRows(2);
    const answers: Answer[] = [];
    for (let i = 0; i < 4; i++) {
      answers.push(await post(`${rt.url}/wine/v2/models/m1/infer`, v2Body(rows)));
      answers.push(await post(`${rt.url}/wine/`, v2Body(rows), { serve_multiplexed_model_id: 'm1' }));
      answers.push(await post(`${rt.url}/wine/`, v2Body(rows), { 'serve-multiplexed-model-id': 'm1' }));
      answers.push(await post(`${rt.url}/wine/invocations`, v2Body(rows), { 'X-Amzn-SageMaker-Target-Model': 'm1' }));
    }
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.headers.get('x-modelmux-replica')).toBe(replicaName(holder));
      expect(a.headers.get('x-modelmux-cache')).toBe('hit');
      expectClose(v2Outputs(a), expected('m1', rows));
    }
    expect(await totalLoads(rs)).toBe(1);
    const echoed = await post(`${rt.url}/wine/v2/models/m1/infer`, v2Body(rows), { 'x-request-id': 'trace-7' });
    expect(echoed.headers.get('x-request-id')).toBe('trace-7');
    expect((await get(`${rt.url}/wine/v2/models/m1`)).body).toMatchObject({ name: 'm1' });
    expect((await get(`${rt.url}/wine/v2/health/ready`)).status).toBe(200);
    const m = await rt.metrics();
    expect(m.get('modelmux_router_placements_total{route="/wine",kind="holder"}')).toBeGreaterThanOrEqual(16);
    expect(m.get('modelmux_router_requests_total{route="/wine",code="2xx"}')).toBeGreaterThanOrEqual(17);
    // Access lines are written in batches, at most 50 ms after their request.
    const access = await eventually(
      () => {
        const lines = rt.logLines().filter((l) => l.msg === 'request' && l.requestId === 'trace-7');
        if (lines.length === 0) throw new Error('no access line for trace-7 yet');
        return lines;
      },
      5000,
      25,
    );
    expect(access).toEqual([expect.objectContaining({ status: 200, route: '/wine', model: 'm1', replica: holder.url, placement: 'holder' })]);
  });

  it('loads each cold model exactly once in total when two router instances send it at the same time', async () => {
    const rs = await replicas(3);
    const urls = rs.map((r) => r.url);
    const [a, b] = await Promise.all([router(urls), router(urls)]);
    const cold = ['c1', 'c2', 'c3', 'c4', 'c5', 'c6'];
    const sends = cold.flatMap((m) => [a, b, a, b].map((rt) => infer(rt.url, m)));
    const answers = await Promise.all(sends);
    for (const ans of answers) expect(ans.status).toBe(200);
    expect(await totalLoads(rs)).toBe(cold.length);
    // Each model answered from a single replica, whichever router it went through.
    for (const m of cold) {
      const from = new Set(answers.filter((_, i) => cold[Math.floor(i / 4)] === m).map((x) => x.headers.get('x-modelmux-replica')));
      expect(from.size).toBe(1);
    }
  });

  it('gives a hot model a second copy before any request waits out the matching timeout', async () => {
    const rs = await replicas(3, ['--max-ongoing-requests', '4', '--test-hooks', 'true']);
    const rt = await router(
      rs.map((r) => r.url),
      ['--max-ongoing-requests', '4', '--match-timeout-seconds', '10'],
    );
    const t0 = Date.now();
    const answers = await Promise.all(Array.from({ length: 12 }, () => infer(rt.url, 'hot', { 'x-modelmux-test-delay-ms': '400' })));
    const elapsed = Date.now() - t0;
    for (const a of answers) expect(a.status).toBe(200);
    const servedBy = new Set(answers.map((a) => a.headers.get('x-modelmux-replica')));
    expect(servedBy.size).toBeGreaterThanOrEqual(2);
    // The matching timeout is 10 s: nobody waited for it.
    expect(elapsed).toBeLessThan(10_000);
    const m = await rt.metrics();
    expect(m.get('modelmux_router_placements_total{route="/wine",kind="new_copy"}')).toBeGreaterThanOrEqual(1);
    expect(m.get('modelmux_router_placements_total{route="/wine",kind="fallback_after_timeout"}') ?? 0).toBe(0);
  });

  it('loses no request when a replica is killed under load', async () => {
    const rs = await replicas(3, ['--test-hooks', 'true']);
    const rt = await router(rs.map((r) => r.url));
    const models = ['k1', 'k2', 'k3', 'k4'];
    let sent = 0;
    const statuses: number[] = [];
    const servedBy: (string | null)[] = [];
    const worker = async (): Promise<void> => {
      while (sent < 160) {
        const model = models[sent++ % models.length] ?? 'k1';
        const a = await infer(rt.url, model, { 'x-modelmux-test-delay-ms': '20' });
        statuses.push(a.status);
        servedBy.push(a.headers.get('x-modelmux-replica'));
      }
    };
    const load = Promise.all(Array.from({ length: 6 }, worker));
    await eventually(() => expect(sent).toBeGreaterThanOrEqual(50), 30_000, 10);
    // The victim is the replica that served the most so far: it surely has requests in flight.
    const counts = rs.map((r) => servedBy.filter((n) => n === replicaName(r)).length);
    const victim = rs[counts.indexOf(Math.max(...counts))] as ReplicaProcess;
    process.kill(victim.pid, 'SIGKILL');
    await load;
    expect(statuses).toHaveLength(160);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(servedBy.filter((n) => n === replicaName(victim)).length).toBeGreaterThan(0);
  });

  it('keeps routing when a replica publishes a garbage table', async () => {
    const rs = await replicas(2);
    // A replica stand-in whose table endpoint answers garbage and whose other answers are fine.
    let stubHits = 0;
    const stub: Server = createServer((req, res) => {
      if (req.url === '/models') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"version":"x","loaded":["../../etc",7],"capacity":-1');
      stubHits++;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"live":true}');
    });
    await new Promise<void>((r) => stub.listen(0, '127.0.0.1', () => r()));
    started.push({ stop: async () => (await new Promise<void>((r) => stub.close(() => r())), 0) });
    const stubUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
    const rt = await router([...rs.map((r) => r.url), stubUrl]);
    const routes = (await get(`${rt.adminUrl}/routes`)).body.routes as { prefix: string; replicas: { name: string }[] }[];
    expect(routes[0]?.replicas.map((x) => x.name)).toContain(stubUrl);
    // Requests without a model id reach every replica, the stand-in included.
    for (let i = 0; i < 30; i++) expect((await get(`${rt.url}/wine/v2/health/live`)).status).toBe(200);
    expect(stubHits).toBeGreaterThan(0);
    // Model requests still go where the valid tables say.
    const warm = await post(`${(rs[0] as ReplicaProcess).url}/v2/models/g1/infer`, v2Body(wineRows(1)));
    expect(warm.status).toBe(200);
    await sleep(500);
    for (let i = 0; i < 5; i++) {
      const a = await infer(rt.url, 'g1');
      expect(a.status).toBe(200);
      expect(a.headers.get('x-modelmux-replica')).toBe(replicaName(rs[0] as ReplicaProcess));
    }
    expect((await get(`${rt.url}/healthz`)).status).toBe(200);
  });

  it('answers bad requests at the edge with catalogue errors', async () => {
    const rs = await replicas(1);
    const rt = await router(
      rs.map((r) => r.url),
      ['--max-body-bytes', '1Ki'],
    );
    const cases: [Promise<Answer>, number, string][] = [
      [post(`${rt.url}/beer/v2/models/m1/infer`, v2Body(wineRows(1))), 404, 'route_not_found'],
      [post(`${rt.url}/wine/v2/models/a..b/infer`, v2Body(wineRows(1))), 400, 'invalid_model_id'],
      [post(`${rt.url}/wine/`, v2Body(wineRows(1))), 400, 'missing_model_id'],
      [post(`${rt.url}/wine/invocations`, v2Body(wineRows(1)), { 'X-Amzn-SageMaker-Target-Model': 'a/b' }), 400, 'invalid_model_id'],
      [post(`${rt.url}/wine/v2/models/m1/infer`, v2Body(wineRows(200))), 413, 'body_too_large'],
    ];
    for (const [answer, status, code] of cases) {
      const a = await answer;
      expect([a.status, a.body.error]).toEqual([status, code]);
      expect(typeof a.body.message).toBe('string');
    }
    expect((await get(`${rt.url}/healthz`)).status).toBe(200);
  });

  it('answers pool_saturated with Retry-After past its wait queue, and drains in-flight requests on SIGTERM', async () => {
    const rs = await replicas(1, ['--test-hooks', 'true']);
    const rt = await router(
      rs.map((r) => r.url),
      ['--max-ongoing-requests', '1', '--max-queue', '1'],
    );
    const slow = { 'x-modelmux-test-delay-ms': '1500' };
    const first = infer(rt.url, 'm2', slow);
    await inFlightAt(rs[0] as ReplicaProcess, 1);
    const queued = infer(rt.url, 'm2', slow);
    await eventually(async () => expect((await rt.metrics()).get('modelmux_router_queue_depth{route="/wine"}')).toBe(1), 10_000, 20);
    const refused = await fetch(`${rt.url}/wine/v2/models/m2/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(v2Body(wineRows(1))) });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error: string }).error).toBe('pool_saturated');
    const stopping = rt.stop(20_000);
    expect((await first).status).toBe(200);
    expect((await queued).status).toBe(200);
    expect(await stopping).toBe(0);
  });
});
