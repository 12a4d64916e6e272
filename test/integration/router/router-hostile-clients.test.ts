import { setTimeout as sleep } from 'node:timers/promises';
import { expect, jest } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eventually } from '../../../harness/eventually.js';
import { RawClient } from '../../helpers/raw-http-client.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';

jest.setTimeout(60_000);

/**
 * A replica stand-in: these tests are about the router's client connections, which a stalled
 * request never gets past. `GET /models` keeps it in the route; every other request is answered
 * with `x-stub-answer-bytes` bytes (default a small JSON body), and the stand-in records how
 * many it served at once.
 */
interface Stub {
  url: string;
  served: string[];
  maxConcurrent: number;
  server: Server;
}

const ANSWER = Buffer.alloc(64 * 1024 * 1024, 'z');

async function stub(): Promise<Stub> {
  let concurrent = 0;
  const s: Stub = { url: '', served: [], maxConcurrent: 0, server: createServer() };
  s.server.on('request', (req, res) => {
    if (req.url === '/models') return void res.end('{}');
    concurrent++;
    s.maxConcurrent = Math.max(s.maxConcurrent, concurrent);
    const done = (): void => void concurrent--;
    res.once('close', done);
    req.resume();
    req.on('end', () => {
      s.served.push(String(req.headers['x-name'] ?? ''));
      const bytes = Number(req.headers['x-stub-answer-bytes'] ?? '0');
      if (bytes === 0) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes) }).end(ANSWER.subarray(0, bytes));
    });
  });
  await new Promise<void>((r) => s.server.listen(0, '127.0.0.1', r));
  s.url = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
  return s;
}

const TIMEOUTS = {
  headersMs: 1000,
  bodyIdleMs: 1000,
  bodyMs: 2500,
  keepAliveMs: 1500,
  // Long enough that a good request under a loaded machine is served before it (the tests below
  // tell which timeout freed a slot by the order of events, not by the clock).
  writeMs: 3000,
  slowReaderMs: 500,
};

async function router(replica: Stub, fastPath: boolean, extra: string[] = []): Promise<RouterProcess> {
  return startRouter([
    '--routes',
    `/wine=${replica.url}`,
    '--poll-interval-ms',
    '200',
    '--fast-path',
    String(fastPath),
    '--max-ongoing-requests',
    '1',
    '--headers-timeout-ms',
    String(TIMEOUTS.headersMs),
    '--body-idle-timeout-ms',
    String(TIMEOUTS.bodyIdleMs),
    '--body-timeout-ms',
    String(TIMEOUTS.bodyMs),
    '--keep-alive-timeout-ms',
    String(TIMEOUTS.keepAliveMs),
    '--write-timeout-ms',
    String(TIMEOUTS.writeMs),
    '--slow-reader-timeout-ms',
    String(TIMEOUTS.slowReaderMs),
    '--max-response-buffer-bytes',
    '16Mi',
    ...extra,
  ]);
}

const INFER = (extra: string): string => `POST /wine/v2/models/m1/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}\r\n`;

/** The 408 answer's JSON and how long after `since` the connection closed. */
async function timedOut(c: RawClient, since: number, within: number): Promise<{ ms: number; body: unknown }> {
  await c.until((r) => r.closed, within + 5000);
  const ms = Date.now() - since;
  expect(c.text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*connection: close\r\n/i);
  return { ms, body: c.json() };
}

/**
 * A good request through fetch's pool: the router announces its 1.5 s keep-alive timeout
 * (`keep-alive: timeout=1`), so the pool never sends on a connection the router is closing.
 */
async function postGood(r: RouterProcess): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${r.url}/wine/v2/models/m1/infer`, { method: 'POST', headers: { 'x-name': 'good' }, body: '{}' });
  return { status: res.status, body: await res.json() };
}

async function metric(r: RouterProcess, name: string): Promise<number> {
  return (await r.metrics()).get(name) ?? 0;
}

describe.each([
  ['the fast path', true],
  ['node:http only (--fast-path false)', false],
])('router client connections, %s', (_reader, fastPath) => {
  let replica: Stub;
  let rt: RouterProcess;

  beforeAll(async () => {
    replica = await stub();
    rt = await router(replica, fastPath);
  });

  afterAll(async () => {
    await rt?.stop(5000);
    replica?.server.closeAllConnections();
    await new Promise((r) => replica?.server.close(r));
  });

  it('answers a body that stops short of its Content-Length 408 request_timeout after the idle timeout, and lets go of its bytes', async () => {
    // The whole of --max-body-bytes (8Mi) announced, 7 MiB of it sent.
    const c = new RawClient(rt.port).send(INFER('Content-Length: 8388608\r\n'));
    const seven = Buffer.alloc(7 * 1024 * 1024, 'x');
    await new Promise<void>((resolve) => c.socket.write(seven, () => resolve()));
    const sent = Date.now();
    const { ms, body } = await timedOut(c, sent, TIMEOUTS.bodyIdleMs);
    expect(body).toMatchObject({ error: 'request_timeout', message: expect.stringContaining('no byte of the body') });
    expect(ms).toBeGreaterThanOrEqual(TIMEOUTS.bodyIdleMs - 100);
    expect(ms).toBeLessThan(TIMEOUTS.bodyIdleMs + 1500);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="body_idle"}')).toBe(1);
    expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBe(0);
    expect(replica.served).toEqual([]);
  });

  it('answers a chunked body whose last chunk never comes 408 request_timeout after the idle timeout', async () => {
    const c = new RawClient(rt.port).send(INFER('Transfer-Encoding: chunked\r\n') + '5\r\n{"a":\r\n');
    const { ms, body } = await timedOut(c, Date.now(), TIMEOUTS.bodyIdleMs);
    expect(body).toMatchObject({ error: 'request_timeout' });
    expect(ms).toBeGreaterThanOrEqual(TIMEOUTS.bodyIdleMs - 100);
    expect(ms).toBeLessThan(TIMEOUTS.bodyIdleMs + 1500);
  });

  it('answers a body that trickles in forever 408 request_timeout after the body timeout', async () => {
    const c = new RawClient(rt.port).send(INFER('Content-Length: 1000\r\n'));
    const start = Date.now();
    const trickle = setInterval(() => c.send(' '), 200);
    try {
      const { ms, body } = await timedOut(c, start, TIMEOUTS.bodyMs);
      expect(body).toMatchObject({ error: 'request_timeout', message: expect.stringContaining('did not arrive within') });
      expect(ms).toBeGreaterThanOrEqual(TIMEOUTS.bodyMs - 100);
      expect(ms).toBeLessThan(TIMEOUTS.bodyMs + 1500);
    } finally {
      clearInterval(trickle);
    }
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="body_total"}')).toBe(1);
  });

  it('answers a request head that stops halfway 408 request_timeout after the headers timeout', async () => {
    const c = new RawClient(rt.port).send('POST /wine/v2/models/m1/infer HTTP/1.1\r\nHost: x\r\nContent-');
    const { ms, body } = await timedOut(c, Date.now(), TIMEOUTS.headersMs);
    expect(body).toMatchObject({ error: 'request_timeout' });
    expect(ms).toBeGreaterThanOrEqual(TIMEOUTS.headersMs - 100);
    expect(ms).toBeLessThan(TIMEOUTS.headersMs + 1500);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="head"}')).toBe(1);
  });

  it('closes an idle keep-alive connection after the keep-alive timeout', async () => {
    const c = new RawClient(rt.port).send('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await c.until((r) => r.text.includes('{"status":"ok"}'));
    const answered = Date.now();
    // Still open halfway through the keep-alive timeout: the time is what this tests.
    await sleep(TIMEOUTS.keepAliveMs / 2);
    expect(c.closed).toBe(false);
    await c.until((r) => r.closed, TIMEOUTS.keepAliveMs + 3000);
    expect(Date.now() - answered).toBeGreaterThanOrEqual(TIMEOUTS.keepAliveMs - 100);
    expect(c.responses()).toBe(1);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="keep_alive"}')).toBeGreaterThanOrEqual(1);
  });

  it('announces its keep-alive timeout on an answer that keeps the connection, so a pooling client lets go of it first', async () => {
    // A client that does not know when the router closes an idle connection may send on it as it
    // closes: the request is reset (ECONNRESET), and fetch does not retry a POST. undici closes a
    // pooled connection 2 s before the announced timeout (here: at once).
    const c = new RawClient(rt.port).send('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await c.until((r) => r.text.includes('{"status":"ok"}'));
    c.send(INFER('Content-Length: 2\r\n') + '{}');
    await c.until((r) => r.responses() === 2 && r.text.includes('{"ok":true}'));
    const heads = c.text.match(/HTTP\/1\.1 [\s\S]*?\r\n\r\n/g) ?? [];
    const seconds = String(Math.floor(TIMEOUTS.keepAliveMs / 1000));
    expect(heads.map((h) => /\r\nkeep-alive: timeout=(\d+)\r\n/i.exec(h)?.[1])).toEqual([seconds, seconds]);
    c.socket.destroy();
  });

  it("frees the replica's only slot from a client that never reads its large answer, so a good request is served meanwhile", async () => {
    replica.served.length = 0;
    // 64 MiB: more than the kernel's socket buffers and the router's 16 MiB for one answer.
    const hog = new RawClient(rt.port);
    hog.socket.pause();
    hog.send(INFER(`Content-Length: 2\r\nX-Name: hog\r\nX-Stub-Answer-Bytes: ${ANSWER.length}\r\n`) + '{}');
    await eventually(() => expect(replica.served).toEqual(['hog']), 5000, 20);
    const good = await postGood(rt);
    expect(good.status).toBe(200);
    expect(good.body).toEqual({ ok: true });
    expect(replica.served).toEqual(['hog', 'good']);
    expect(replica.maxConcurrent).toBe(1);
    // The slow-reader window (500 ms) freed the slot: not the request timeout (60 s), nor the
    // write timeout, which had not yet closed the hog's connection.
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="slow_reader"}')).toBe(1);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="request"}')).toBe(0);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="downstream_write"}')).toBe(0);
  });

  it('holds an answer that fits its bound for a client that does not read it, frees the replica at once, and closes the connection after the write timeout', async () => {
    replica.served.length = 0;
    // The hog's connection of the test before is gone, and counted if a write timeout closed it:
    // from here on, a write timeout is this test's.
    await eventually(async () => expect(await metric(rt, 'modelmux_router_client_connections')).toBe(0), TIMEOUTS.writeMs + 3000, 50);
    const before = await metric(rt, 'modelmux_router_timeouts_total{phase="downstream_write"}');
    // 12 MiB: more than the kernel takes from a client that reads nothing, within the router's 16 MiB.
    const reader = new RawClient(rt.port);
    reader.socket.pause();
    reader.send(INFER(`Content-Length: 2\r\nX-Name: held\r\nX-Stub-Answer-Bytes: ${12 * 1024 * 1024}\r\n`) + '{}');
    await eventually(() => expect(replica.served).toEqual(['held']), 5000, 20);
    const good = await postGood(rt);
    expect(good.status).toBe(200);
    // Served while the answer is still held and before the write timeout closed the reader: the
    // held answer, not the write timeout, freed the slot.
    expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBeGreaterThan(0);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="downstream_write"}')).toBe(before);
    await eventually(async () => expect(await metric(rt, 'modelmux_router_timeouts_total{phase="downstream_write"}')).toBe(before + 1), TIMEOUTS.writeMs + 3000, 100);
    expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBe(0);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="slow_reader"}')).toBe(1);
  });
});

describe('router connection limits', () => {
  let replica: Stub;
  let rt: RouterProcess;

  beforeAll(async () => {
    replica = await stub();
    rt = await router(replica, true, ['--max-connections', '4', '--max-connections-per-client', '2']);
    // The readiness check's keep-alive connection closes with the keep-alive timeout: counted
    // against the limits, it would take a place the test gives out.
    await eventually(async () => expect(await metric(rt, 'modelmux_router_client_connections')).toBe(0), TIMEOUTS.keepAliveMs + 5000, 50);
  });

  afterAll(async () => {
    await rt?.stop(5000);
    replica?.server.closeAllConnections();
    await new Promise((r) => replica?.server.close(r));
  });

  it('answers a client past its own limit 429 and anyone past the router limit 503, as JSON with Retry-After, and serves the rest', async () => {
    const open = async (from: string): Promise<RawClient> => {
      const c = new RawClient(rt.port, { localAddress: from });
      await new Promise<void>((r) => c.socket.once('connect', () => r()));
      return c;
    };
    const held = [await open('127.0.0.2'), await open('127.0.0.2'), await open('127.0.0.3')];
    const third = (await open('127.0.0.2')).send('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await third.until((r) => r.closed)).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n[\s\S]*retry-after: 1\r\n/);
    expect(third.json()).toMatchObject({ error: 'client_connection_limit' });
    held.push(await open('127.0.0.4'));
    const fifth = (await open('127.0.0.5')).send('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await fifth.until((r) => r.closed)).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n[\s\S]*retry-after: 1\r\n/);
    expect(fifth.json()).toMatchObject({ error: 'connection_limit' });
    // Connections let in are served as usual.
    const first = held[0] as RawClient;
    first.send('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await first.until((r) => r.text.includes('{"status":"ok"}'));
    for (const c of held) c.socket.destroy();
    // The gauge counts the public port's connections: the scrape itself comes to the admin port.
    await eventually(async () => expect(await metric(rt, 'modelmux_router_client_connections')).toBe(0), 5000, 100);
    const m = await rt.metrics();
    expect(m.get('modelmux_router_rejected_connections_total{reason="client_connections"}')).toBe(1);
    expect(m.get('modelmux_router_rejected_connections_total{reason="connections"}')).toBe(1);
  });
});
