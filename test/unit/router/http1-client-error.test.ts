import { expect } from '@jest/globals';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ClientErrors, clientErrorAnswer, clientErrorResponse } from '../../../router/http1/client-error.js';
import { RawClient } from '../../helpers/raw-http-client.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A node:http server set up as the router's: its requests tracked, its clientError answered. */
async function server(handle: Handler, options: { headersTimeout?: number; connectionsCheckingInterval?: number } = {}): Promise<number> {
  const errors = new ClientErrors();
  const s = createServer({ maxHeaderSize: 1024, requestTimeout: 0, ...options }, (req, res) => {
    errors.track(req, res);
    handle(req, res);
  });
  s.on('clientError', errors.onClientError);
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as AddressInfo).port;
}

/** Echoes the body once it has all come. */
const echo: Handler = (req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => res.end(`echo:${req.url}:${body}`));
};

/** Sends `text` (and `later` after a while), then what the server sends until it closes, and how long that took. */
async function exchange(port: number, text: string, later?: string): Promise<{ received: string; ms: number }> {
  const started = Date.now();
  const client = new RawClient(port).send(text);
  if (later !== undefined) setTimeout(() => client.send(later), 100);
  await client.until((c) => c.closed);
  return { received: client.text, ms: Date.now() - started };
}

/** The JSON body of the last response in `received`. */
function lastError(received: string): unknown {
  return JSON.parse(received.slice(received.lastIndexOf('\r\n\r\n') + 4));
}

describe('clientErrorAnswer', () => {
  it("answers with node:http's statuses and the router's codes, and not at all for a connection's own failure", () => {
    const err = (code: string, message = 'Parse Error: x'): Error => Object.assign(new Error(message), { code });
    expect(clientErrorAnswer(err('HPE_INVALID_METHOD', 'Parse Error: Invalid method encountered'))).toEqual({
      error: 'bad_request',
      message: 'not valid HTTP/1.1: Invalid method encountered (HPE_INVALID_METHOD)',
    });
    expect(clientErrorAnswer(err('HPE_HEADER_OVERFLOW'))?.error).toBe('headers_too_large');
    expect(clientErrorAnswer(err('ERR_HTTP_REQUEST_TIMEOUT'))?.error).toBe('request_timeout');
    expect(clientErrorAnswer(err('HPE_CHUNK_EXTENSIONS_OVERFLOW'))?.error).toBe('body_too_large');
    for (const code of ['ECONNRESET', 'EPIPE', 'ETIMEDOUT']) expect(clientErrorAnswer(err(code))).toBeUndefined();
    expect(clientErrorAnswer(new Error('no code'))).toBeUndefined();
  });

  it('writes a whole response that closes the connection', () => {
    const text = clientErrorResponse({ error: 'headers_too_large', message: 'm' });
    const body = '{"error":"headers_too_large","message":"m"}';
    expect(text).toBe(`HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
  });
});

describe('ClientErrors on a node:http server', () => {
  it('answers a bare-LF head with 400 bad_request at once and closes', async () => {
    const port = await server(echo);
    const got = await exchange(port, 'GET / HTTP/1.1\nHost: x\n\n');
    expect(got.ms).toBeLessThan(1000);
    expect(got.received).toMatch(/^HTTP\/1\.1 400 Bad Request\r\ncontent-type: application\/json\r\n[\s\S]*connection: close\r\n/);
    expect(lastError(got.received)).toEqual({ error: 'bad_request', message: expect.stringContaining('HPE_') });
  });

  it('answers a head larger than the limit with 431 headers_too_large', async () => {
    const port = await server(echo);
    const got = await exchange(port, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(2000)}\r\n\r\n`);
    expect(got.received).toMatch(/^HTTP\/1\.1 431 /);
    expect(lastError(got.received)).toMatchObject({ error: 'headers_too_large' });
  });

  it('answers a head that does not come in time with 408 request_timeout', async () => {
    const port = await server(echo, { headersTimeout: 300, connectionsCheckingInterval: 50 });
    const got = await exchange(port, 'GET / HTTP/1.1\r\nHost: x\r\n');
    expect(got.received).toMatch(/^HTTP\/1\.1 408 /);
    expect(lastError(got.received)).toMatchObject({ error: 'request_timeout' });
  });

  it('answers the requests before a malformed one first, then the error, never inside an answer', async () => {
    // The first answer takes a while: node:http has read the bad bytes long before it ends.
    const port = await server((req, res) => {
      if (req.url === '/slow') {
        res.writeHead(200, { 'content-length': '9' });
        res.write('slow-');
        setTimeout(() => res.end('done'), 200);
      } else echo(req, res);
    });
    const got = await exchange(port, 'GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\nHost: x\n\n');
    const statuses = [...got.received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '200', '400']);
    expect(got.received).toContain('slow-done');
    expect(got.received).toContain('echo:/b:');
    expect(lastError(got.received)).toMatchObject({ error: 'bad_request' });
  });

  it("answers an error inside a request's body in place of that request's answer", async () => {
    const port = await server(echo);
    const got = await exchange(port, 'POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n');
    expect(got.received).toMatch(/^HTTP\/1\.1 400 /);
    expect(got.received).not.toContain('echo:');
  });

  it('closes without an error answer when the answer to the request in error has begun', async () => {
    const port = await server((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('begun');
    });
    const got = await exchange(port, 'POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n', 'zz\r\n');
    expect(got.received).toMatch(/^HTTP\/1\.1 200 /);
    expect(got.received).toContain('begun');
    expect(got.received).not.toContain('HTTP/1.1 400');
  });
});
