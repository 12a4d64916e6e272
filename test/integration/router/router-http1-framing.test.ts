import { expect, jest } from '@jest/globals';
import { request } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { RawClient } from '../../helpers/raw-http-client.js';
import { readRequests } from '../../helpers/raw-requests.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';

jest.setTimeout(60_000);

/**
 * HTTP/1.1 framing at the router's two edges, against a real router process: what a misbehaving
 * replica's answer becomes for the client, and what a client's malformed request gets back.
 * The replica is a raw TCP server on loopback, as it is about the bytes a replica sends.
 */

const OK = '{"ok":true}';
/** Answers by the model id in the path: each a different way of framing (or misframing) `OK`. */
const ANSWERS: Record<string, string> = {
  dup: `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${OK.length}\r\ncontent-length: ${OK.length}\r\n\r\n${OK}`,
  list: `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${OK.length}, ${OK.length}\r\n\r\n${OK}`,
  conflict: `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${OK.length}\r\ncontent-length: ${OK.length + 1}\r\n\r\n${OK}`,
  barelf: `HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: ${OK.length}\n\n${OK}`,
};
const TABLE = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}';

/** A replica that answers `GET /models` properly and each inference with `ANSWERS[model]`, keep-alive. */
async function rawReplica(): Promise<{ url: string; server: Server }> {
  const server = createServer((socket: Socket) => {
    readRequests(socket, {
      request: (head) => {
        const model = /^\S+ \/v2\/models\/([^/]+)\/infer /.exec(head.text)?.[1];
        socket.write(model === undefined ? TABLE : (ANSWERS[model] ?? TABLE));
      },
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

interface NodeAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  rawHeaders: string[];
  body: string;
}

/** One inference through node's own HTTP client, which refuses a repeated Content-Length. */
function infer(base: string, model: string): Promise<NodeAnswer> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ inputs: [{ name: 'x', shape: [1], datatype: 'FP32', data: [1] }] });
    const req = request(`${base}/wine/v2/models/${model}/infer`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(body.length) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Sends raw bytes to the router; what it sends back until it closes, and how long that took. */
async function raw(port: number, text: string): Promise<{ client: RawClient; ms: number }> {
  const started = Date.now();
  const client = new RawClient(port).send(text);
  await client.until((c) => c.closed, 5000);
  return { client, ms: Date.now() - started };
}

let replica: { url: string; server: Server };
const routers: RouterProcess[] = [];

beforeAll(async () => {
  replica = await rawReplica();
});
afterEach(async () => {
  await Promise.all(routers.splice(0).map((r) => r.stop(5000)));
});
afterAll(async () => {
  await new Promise((r) => replica.server.close(r));
});

async function router(args: string[] = []): Promise<RouterProcess> {
  const r = await startRouter(['--routes', `/wine=${replica.url}`, '--poll-interval-ms', '200', ...args]);
  routers.push(r);
  return r;
}

describe.each([
  ['with the fast path', []],
  ['with node:http only', ['--fast-path', 'false']],
])('the router %s', (_name, args) => {
  it("gives the client one Content-Length where a replica repeats an identical one, so node's client takes the answer", async () => {
    const rt = await router(args);
    for (const model of ['dup', 'list']) {
      const a = await infer(rt.url, model);
      expect(a.status).toBe(200);
      expect(a.body).toBe(OK);
      expect(a.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === 'content-length')).toHaveLength(1);
      expect(a.headers['content-length']).toBe(String(OK.length));
    }
  });

  it('answers 502 upstream_unavailable at once where a replica sends differing lengths or bare-LF line ends', async () => {
    const rt = await router(args);
    for (const model of ['conflict', 'barelf']) {
      const started = Date.now();
      const a = await infer(rt.url, model);
      expect(a.status).toBe(502);
      expect(JSON.parse(a.body)).toMatchObject({ error: 'upstream_unavailable', message: expect.stringContaining('HTTP_PROTOCOL_ERROR') });
      // Not the request deadline (60 s): the answer is refused as soon as it is read.
      expect(Date.now() - started).toBeLessThan(5000);
    }
  });

  it('answers a bare-LF request head with 400 bad_request at once, and closes', async () => {
    const rt = await router(args);
    const { client, ms } = await raw(rt.port, 'GET /wine/v2/models/dup HTTP/1.1\nHost: x\n\n');
    expect(ms).toBeLessThan(2000);
    expect(client.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*content-type: application\/json\r\n[\s\S]*connection: close\r\n/);
    expect(client.json()).toMatchObject({ error: 'bad_request', message: expect.stringContaining('not valid HTTP/1.1') });
  });

  it('answers malformed framing with 400 bad_request and a head over 16 KiB with 431 headers_too_large, in JSON', async () => {
    const rt = await router(args);
    for (const bad of [
      'POST /wine/v2/models/dup/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}',
      'POST /wine/v2/models/dup/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'GET /wine HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n',
      'GET /wine HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n',
    ]) {
      const { client } = await raw(rt.port, bad);
      expect(client.text).toMatch(/^HTTP\/1\.1 400 /);
      expect(client.json()).toMatchObject({ error: 'bad_request' });
    }
    const big = await raw(rt.port, `GET /wine HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`);
    expect(big.client.text).toMatch(/^HTTP\/1\.1 431 /);
    expect(big.client.json()).toMatchObject({ error: 'headers_too_large' });
    // The router still serves.
    expect((await infer(rt.url, 'dup')).status).toBe(200);
  });
});
