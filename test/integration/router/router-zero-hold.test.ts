import { createServer } from 'node:net';
import { jest } from '@jest/globals';
import { wineModelBytes } from '../../../common/wine-model.js';
import { eventually } from '../../../harness/eventually.js';
import { startReplica } from '../../../harness/replica-process.js';
import { startRouter } from '../../../harness/router-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { expectClose, expected, post, v2Body, v2Outputs, wineRows } from '../replica/wine-fixtures.js';

// Scale from zero, router side (issue 40): a static route whose one replica is not running is a
// route with no replica. Its requests are held in the router, counted in
// modelmux_router_held_requests, and answered once the replica starts; past the bounds
// (--zero-hold-ms, --zero-hold-max) they are 503 no_replicas with Retry-After.

jest.setTimeout(120_000);

let s3: S3Server;
const started: { stop(graceMs?: number): Promise<number | null> }[] = [];

beforeAll(async () => {
  s3 = await startS3Server();
  await s3.put('wine/z0/model.onnx', wineModelBytes('z0'));
}, 600_000);

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop(5000)));
});

afterAll(async () => {
  await s3?.stop();
});

/** A port nothing listens on (just released), for a replica started later. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('a route with no replica', () => {
  it('holds a request until its replica starts, then answers it', async () => {
    const port = await freePort();
    const router = await startRouter(['--routes', `/wine=http://127.0.0.1:${port}`, '--poll-interval-ms', '200', '--zero-hold-ms', '60000']);
    started.push(router);
    const rows = wineRows(2, 7);
    const sentAt = Date.now();
    const answer = post(`${router.url}/wine/v2/models/z0/infer`, v2Body(rows));
    await eventually(async () => expect((await router.metrics()).get('modelmux_router_held_requests{route="/wine"}')).toBe(1), 10_000, 25);
    // The request is still held (not refused) when the replica starts after it.
    const replica = await startReplica({ port, args: ['--model-source', `s3://${s3.bucket}/wine`, '--s3-endpoint', s3.endpoint], env: s3.awsEnv });
    started.push(replica);
    const a = await answer;
    process.stdout.write(`held request answered after ${Date.now() - sentAt} ms\n`);
    expect(a.status).toBe(200);
    expectClose(v2Outputs(a), expected('z0', rows));
    const m = await router.metrics();
    expect(m.get('modelmux_router_held_requests{route="/wine"}')).toBe(0);
    // One request, one answer, no refusal on the way.
    expect(m.get('modelmux_router_requests_total')).toBe(1);
    expect(m.get('modelmux_router_requests_total{route="/wine",code="2xx"}')).toBe(1);
  });

  it('answers 503 no_replicas with Retry-After past --zero-hold-max at once, and past --zero-hold-ms', async () => {
    const port = await freePort();
    const router = await startRouter(['--routes', `/wine=http://127.0.0.1:${port}`, '--zero-hold-ms', '1500', '--zero-hold-max', '1']);
    started.push(router);
    const sentAt = Date.now();
    const first = post(`${router.url}/wine/v2/models/z0/infer`, v2Body(wineRows(1)));
    await eventually(async () => expect((await router.metrics()).get('modelmux_router_held_requests{route="/wine"}')).toBe(1), 10_000, 25);
    const second = await post(`${router.url}/wine/v2/models/z0/infer`, v2Body(wineRows(1)));
    expect([second.status, second.body['error'], second.headers.get('retry-after')]).toEqual([503, 'no_replicas', '1']);
    const a = await first;
    const heldMs = Date.now() - sentAt;
    expect([a.status, a.body['error'], a.headers.get('retry-after')]).toEqual([503, 'no_replicas', '1']);
    expect(String(a.body['message'])).toContain('1500 ms');
    expect(heldMs).toBeGreaterThanOrEqual(1500);
    expect((await router.metrics()).get('modelmux_router_held_requests{route="/wine"}')).toBe(0);
  });
});
