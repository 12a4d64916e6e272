import { createServer, IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DownstreamRequest, DownstreamResponse } from '../../../router/http1/downstream.js';
import { FastPath, type FastPathOptions } from '../../../router/http1/fast-path.js';
import type { TimeoutPhase } from '../../../router/metrics.js';
import { RawClient } from '../../helpers/raw-http-client.js';

/**
 * A server whose handler echoes what it got and says which side served it: `fast` (the fast
 * path) or `node` (a connection node:http took over). `x-mode` picks an answer shape.
 */
interface Harness {
  port: number;
  server: Server;
  fast: FastPath;
  closed: string[];
  /** The url of every request the handler got, in order. */
  served: string[];
  /** What the fast path said each timeout it enforced was. */
  timeouts: TimeoutPhase[];
}

const LARGE = 'z'.repeat(256 * 1024);

function handler(closed: string[], served: string[]) {
  return (req: DownstreamRequest, res: DownstreamResponse): void => {
    const by = req instanceof IncomingMessage ? 'node' : 'fast';
    const raw = req.rawHeaders;
    const mode = raw[raw.findIndex((h, i) => i % 2 === 0 && h.toLowerCase() === 'x-mode') + 1];
    served.push(req.url ?? '');
    res.on('close', () => void closed.push(req.url ?? ''));
    if (mode === 'ignore-body') return void res.writeHead(200, ['x-served-by', by]).end('ignored');
    if (mode === 'large') return void res.writeHead(200, ['x-served-by', by]).end(LARGE);
    if (mode === 'hang') return;
    // Reads the socket beside node:http, which then stops reading the handle itself.
    if (mode === 'tap' && req instanceof IncomingMessage) req.socket.on('data', () => undefined);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => void chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      if (mode === 'stream') {
        res.writeHead(200, ['x-served-by', by]);
        res.write(Buffer.from('one,'));
        setTimeout(() => {
          res.write(Buffer.from('two'));
          res.end();
        }, 10);
        return;
      }
      const answer = (): void => void res.writeHead(200, ['content-type', 'application/json', 'x-served-by', by]).end(JSON.stringify({ method: req.method, url: req.url, body }));
      if (mode === 'slow') setTimeout(answer, 100);
      else answer();
    });
  };
}

const open: Harness[] = [];
async function harness(options: Partial<FastPathOptions> = {}): Promise<Harness> {
  const closed: string[] = [];
  const served: string[] = [];
  const timeouts: TimeoutPhase[] = [];
  const handle = handler(closed, served);
  const server = createServer({ keepAliveTimeout: 65_000, maxHeaderSize: 1024 }, (req, res) => handle(req, res));
  const fast = new FastPath(server, handle, {
    maxHeadBytes: 1024,
    keepAliveTimeoutMs: 65_000,
    headersTimeoutMs: 60_000,
    bodyIdleTimeoutMs: 60_000,
    bodyTimeoutMs: 60_000,
    sweepMs: 20,
    onTimeout: (phase) => void timeouts.push(phase),
    ...options,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const h = { port: (server.address() as AddressInfo).port, server, fast, closed, served, timeouts };
  open.push(h);
  return h;
}
afterEach(async () => {
  for (const h of open.splice(0)) {
    h.fast.closeAll();
    h.server.closeAllConnections();
    await new Promise((r) => h.server.close(r));
  }
});

const GET = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('FastPath', () => {
  it('serves pipelined keep-alive requests in order on one connection', async () => {
    const h = await harness();
    const c = new RawClient(h.port).send(GET('/a') + GET('/b?q=1') + `POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello`);
    const text = await c.until((r) => r.responses() === 3 && r.text.endsWith('}'));
    const bodies = [...text.matchAll(/\{[^}]*\}/g)].map((m) => JSON.parse(m[0]) as unknown);
    expect(bodies).toEqual([
      { method: 'GET', url: '/a', body: '' },
      { method: 'GET', url: '/b?q=1', body: '' },
      { method: 'POST', url: '/c', body: 'hello' },
    ]);
    expect(text).toContain('x-served-by: fast');
    expect(text).not.toContain('x-served-by: node');
    expect(text).toMatch(/content-length: \d+\r\n/);
    expect(text).toMatch(/\r\ndate: /);
    expect(c.closed).toBe(false);
    expect(h.fast.size).toBe(1);
  });

  it('takes a body in pieces, byte by byte, and a head split anywhere', async () => {
    const h = await harness();
    const c = new RawClient(h.port);
    const msg = `POST /split HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world`;
    for (const ch of msg) {
      c.send(ch);
      await sleep(1);
    }
    const text = await c.until((r) => r.text.endsWith('}'));
    expect(JSON.parse(text.slice(text.indexOf('{')))).toEqual({ method: 'POST', url: '/split', body: 'hello world' });
  });

  it('answers with a chunked body when the handler streams without a length', async () => {
    const h = await harness();
    const got = await new Promise<{ headers: IncomingMessage['headers']; body: string }>((resolve, reject) => {
      const r = request({ port: h.port, host: '127.0.0.1', path: '/s', headers: { 'x-mode': 'stream' } }, (res) => {
        let body = '';
        res.setEncoding('latin1');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ headers: res.headers, body }));
      });
      r.on('error', reject);
      r.end();
    });
    expect(got.body).toBe('one,two');
    expect(got.headers['transfer-encoding']).toBe('chunked');
    expect(got.headers['x-served-by']).toBe('fast');
  });

  it('hands the connection to node:http at the first request outside its subset, bytes and all', async () => {
    const h = await harness();
    const c = new RawClient(h.port).send(GET('/first') + `POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n` + GET('/after'));
    // node:http chunks its answers: the last one ends with the last-chunk.
    const text = await c.until((r) => r.text.includes('"url":"/after"') && r.text.endsWith('0\r\n\r\n'));
    const served = [...text.matchAll(/x-served-by: (\w+)/g)].map((m) => m[1]);
    expect(served).toEqual(['fast', 'node', 'node']);
    expect(text).toContain('"url":"/chunked","body":"hello"');
    expect(h.fast.size).toBe(0);
  });

  it('gives a handed-over connection its later reads, whether node:http parses the socket or its stream', async () => {
    const h = await harness();
    const chunked = (path: string, extra = ''): string => `POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n${extra}\r\n`;
    const c = new RawClient(h.port).send(GET('/first') + chunked('/parsed'));
    await sleep(30);
    c.send('3\r\none\r\n');
    await sleep(30);
    c.send('0\r\n\r\n');
    await c.until((r) => r.text.includes('"url":"/parsed"'));
    c.send(chunked('/tapped', 'X-Mode: tap\r\n') + '3\r\ntwo\r\n0\r\n\r\n');
    await c.until((r) => r.text.includes('"url":"/tapped"'));
    await sleep(30);
    c.send(GET('/after'));
    const text = await c.until((r) => r.text.includes('"url":"/after"') && r.text.endsWith('0\r\n\r\n'));
    expect([...text.matchAll(/x-served-by: (\w+)/g)].map((m) => m[1])).toEqual(['fast', 'node', 'node', 'node']);
    expect(text).toContain('"url":"/parsed","body":"one"');
    expect(text).toContain('"url":"/tapped","body":"two"');
  });

  it('leaves HTTP/1.0, Expect and malformed requests to node:http', async () => {
    const h = await harness();
    const old = new RawClient(h.port).send('GET /old HTTP/1.0\r\n\r\n');
    expect(await old.until((r) => r.closed)).toMatch(/^HTTP\/1\.1 200[\s\S]*x-served-by: node/);
    const expect100 = new RawClient(h.port).send(`POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n`);
    await expect100.until((r) => r.text.includes('100 Continue'));
    expect100.send('ok');
    expect(await expect100.until((r) => r.text.endsWith('0\r\n\r\n'))).toContain('"body":"ok"');
    for (const bad of [
      'GET /x HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n',
      'GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
      'GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n',
    ]) {
      const c = new RawClient(h.port).send(bad);
      expect(await c.until((r) => r.closed)).toMatch(/^HTTP\/1\.1 400 /);
    }
    const big = new RawClient(h.port).send(`GET /big HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(2000)}\r\n\r\n`);
    expect(await big.until((r) => r.closed)).toMatch(/^HTTP\/1\.1 431 /);
  });

  it('closes after the response when the client asks, and drops a body the handler did not read', async () => {
    const h = await harness();
    const c = new RawClient(h.port).send(`POST /ignored HTTP/1.1\r\nHost: x\r\nX-Mode: ignore-body\r\nContent-Length: 10\r\n\r\n0123456789` + GET('/next', 'Connection: close\r\n'));
    const text = await c.until((r) => r.closed);
    expect(c.responses()).toBe(2);
    expect(text).toContain('ignored');
    expect(text).toContain('"url":"/next"');
    expect(text).toMatch(/connection: close\r\n/);
  });

  it('keeps a closing connection tracked until the client closes its side too, so a drain still ends it', async () => {
    const h = await harness();
    // A client that never closes its side after the server's end.
    const c = new RawClient(h.port, { allowHalfOpen: true }).send(GET('/last', 'Connection: close\r\n'));
    await c.until((r) => r.text.endsWith('}'));
    await sleep(50);
    expect(h.fast.size).toBe(1);
    h.fast.drain();
    await sleep(50);
    expect(h.fast.size).toBe(0);
  });

  it('answers HEAD without a body', async () => {
    const h = await harness();
    const c = new RawClient(h.port).send(`HEAD /h HTTP/1.1\r\nHost: x\r\nX-Mode: ignore-body\r\n\r\n` + GET('/after-head'));
    const text = await c.until((r) => r.responses() === 2 && r.text.endsWith('}'));
    expect(text.indexOf('ignored')).toBe(-1);
    expect(text).toContain('"url":"/after-head"');
  });

  it('tells the handler when the client goes away before its answer', async () => {
    const h = await harness();
    const c = new RawClient(h.port).send(GET('/hang', 'X-Mode: hang\r\n'));
    await sleep(50);
    c.socket.destroy();
    await sleep(50);
    expect(h.closed).toEqual(['/hang']);
    expect(h.fast.size).toBe(0);
  });

  it('closes idle connections after the keep-alive timeout and answers stalled heads 408 after the headers timeout', async () => {
    const h = await harness({ keepAliveTimeoutMs: 1000, headersTimeoutMs: 1000 });
    const idle = new RawClient(h.port).send(GET('/once'));
    await idle.until((r) => r.text.endsWith('}'));
    const stalled = new RawClient(h.port).send('GET /slow HTTP/1.1\r\nHo');
    await sleep(300);
    expect(idle.closed || stalled.closed).toBe(false);
    await idle.until((r) => r.closed);
    const text = await stalled.until((r) => r.closed);
    expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*connection: close\r\n/);
    expect(stalled.json()).toMatchObject({ error: 'request_timeout' });
    expect(h.timeouts.sort()).toEqual(['head', 'keep_alive']);
  });

  it('drops a body the handler left unread while it keeps coming, and closes the connection when it stops', async () => {
    const h = await harness({ bodyIdleTimeoutMs: 1000, bodyTimeoutMs: 60_000 });
    const c = new RawClient(h.port).send(`POST /ignored HTTP/1.1\r\nHost: x\r\nX-Mode: ignore-body\r\nContent-Length: 20\r\n\r\n0123`);
    await c.until((r) => r.text.includes('ignored'));
    // Bytes that keep coming keep the connection; then nothing comes for the idle timeout.
    for (let i = 0; i < 3; i++) {
      await sleep(250);
      c.send('45');
    }
    expect(c.closed).toBe(false);
    await c.until((r) => r.closed);
    expect(h.timeouts).toEqual(['body_idle']);
    // The whole body has a bound too, however steadily it trickles.
    const h2 = await harness({ bodyIdleTimeoutMs: 60_000, bodyTimeoutMs: 500 });
    const t0 = Date.now();
    const d = new RawClient(h2.port).send(`POST /ignored HTTP/1.1\r\nHost: x\r\nX-Mode: ignore-body\r\nContent-Length: 100\r\n\r\n0`);
    const trickle = setInterval(() => d.send('1'), 50);
    await d.until((r) => r.closed);
    clearInterval(trickle);
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(h2.timeouts).toEqual(['body_total']);
  });

  it('reads no further request while the client has not taken the answers already written to it', async () => {
    const h = await harness();
    // A client that pipelines requests for a large answer and does not read: the fast path
    // serves them until the connection's queue is over its mark, then waits.
    const c = new RawClient(h.port);
    c.socket.pause();
    const n = 100;
    c.send(`GET /big HTTP/1.1\r\nHost: x\r\nX-Mode: large\r\n\r\n`.repeat(n));
    await sleep(300);
    // The kernel's socket buffers take a few MiB of the 25 MiB asked for.
    const served = h.served.length;
    expect(served).toBeGreaterThan(0);
    expect(served).toBeLessThan(n);
    await sleep(200);
    expect(h.served).toHaveLength(served);
    c.socket.resume();
    await c.until((r) => r.text.length >= n * LARGE.length);
    expect(h.served).toHaveLength(n);
  });

  it('on drain closes idle connections at once and busy ones after their response', async () => {
    const h = await harness();
    const idle = new RawClient(h.port).send(GET('/idle'));
    await idle.until((r) => r.text.endsWith('}'));
    const busy = new RawClient(h.port).send(GET('/busy', 'X-Mode: stream\r\n'));
    await busy.until((r) => r.text.includes('one,'));
    h.fast.drain();
    await idle.until((r) => r.closed);
    // Its head went out before the drain: the close comes after the whole response.
    expect(await busy.until((r) => r.closed)).toMatch(/one,\r\n3\r\ntwo\r\n0\r\n\r\n$/);
    // A request under way whose head has not gone out is told that the connection closes.
    const late = new RawClient(h.port).send(GET('/late', 'X-Mode: slow\r\n'));
    await sleep(30);
    h.fast.drain();
    expect(await late.until((r) => r.closed)).toMatch(/connection: close\r\n[\s\S]*"url":"\/late"/);
  });
});
