import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { fieldValue } from '../../../router/http1/http1-syntax.js';
import { UpstreamPool, type UpstreamController, type UpstreamHandler, type UpstreamRequest } from '../../../router/exchange/upstream-pool.js';

/** What one try ended with. */
interface Outcome {
  status?: number;
  headers?: string[];
  body: string;
  error?: Error & { code?: string };
}

/** A handler that gathers the response and settles when the try ends; hooks act mid-try. */
class Collector implements UpstreamHandler {
  readonly outcome: Outcome = { body: '' };
  controller: UpstreamController | undefined;
  chunks = 0;
  readonly done: Promise<Outcome>;
  private settle!: (o: Outcome) => void;
  constructor(private readonly hooks: { onData?: (c: UpstreamController, n: number) => void } = {}) {
    this.done = new Promise((resolve) => (this.settle = resolve));
  }
  onRequestStart(controller: UpstreamController): void {
    this.controller = controller;
  }
  onResponseStart(_c: UpstreamController, status: number, headers: string[]): void {
    this.outcome.status = status;
    this.outcome.headers = headers;
  }
  onResponseData(c: UpstreamController, chunk: Buffer): void {
    this.chunks++;
    this.outcome.body += chunk.toString('latin1');
    this.hooks.onData?.(c, this.chunks);
  }
  onResponseEnd(): void {
    this.settle(this.outcome);
  }
  onResponseError(_c: UpstreamController, err: Error): void {
    this.outcome.error = err;
    this.settle(this.outcome);
  }
}

function send(pool: UpstreamPool, request: Partial<UpstreamRequest> = {}, hooks?: ConstructorParameters<typeof Collector>[0]): Collector {
  const c = new Collector(hooks);
  pool.dispatch({ method: 'GET', path: '/', headers: [], body: null, ...request }, c);
  return c;
}

const listen = async <S extends Server | NetServer>(server: S): Promise<{ server: S; url: string; sockets: Socket[] }> => {
  const sockets: Socket[] = [];
  server.on('connection', (s: Socket) => sockets.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sockets };
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Handle = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** A node:http server: the same stack a replica answers with. */
async function httpServer(handle: Handle): Promise<{ server: Server; url: string; sockets: Socket[] }> {
  return listen(
    createServer((req, res) => {
      let body = '';
      req.setEncoding('latin1');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => handle(req, res, body));
    }),
  );
}

/** A raw TCP server that answers each request with `reply(socket, requestText)`. */
async function rawServer(reply: (socket: Socket, request: string) => void): Promise<{ server: NetServer; url: string; sockets: Socket[] }> {
  return listen(createNetServer((s) => s.on('data', (d) => reply(s, d.toString('latin1')))));
}

const servers: (Server | NetServer)[] = [];
const pools: UpstreamPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
  for (const s of servers.splice(0)) {
    (s as Server).closeAllConnections?.();
    await new Promise((r) => s.close(r));
  }
});

function track<T extends { server: Server | NetServer }>(x: T): T {
  servers.push(x.server);
  return x;
}
function pool(url: string, connections = 4, keepAliveTimeoutMs = 10_000): UpstreamPool {
  const p = new UpstreamPool(url, { connections, keepAliveTimeoutMs });
  pools.push(p);
  return p;
}

describe('UpstreamPool against node:http', () => {
  it('sends method, path, headers and body, and reuses one keep-alive connection', async () => {
    const seen: { method: string | undefined; url: string | undefined; headers: IncomingMessage['headers']; body: string }[] = [];
    const s = track(
      await httpServer((req, res, body) => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        res.writeHead(200, { 'content-type': 'application/json', 'x-answer': 'yes' }).end(JSON.stringify({ n: seen.length }));
      }),
    );
    const p = pool(s.url);
    for (let i = 1; i <= 5; i++) {
      const out = await send(p, { method: 'POST', path: `/v2/models/m${i}/infer?x=1`, headers: ['content-type', 'application/json', 'x-modelmux-model', `m${i}`], body: Buffer.from(`{"i":${i}}`) })
        .done;
      expect(out.error).toBeUndefined();
      expect(out.status).toBe(200);
      expect(fieldValue(out.headers ?? [], 'x-answer')).toBe('yes');
      expect(JSON.parse(out.body)).toEqual({ n: i });
    }
    expect(s.sockets).toHaveLength(1);
    expect(p.connections).toBe(1);
    expect(seen[2]).toMatchObject({ method: 'POST', url: '/v2/models/m3/infer?x=1', body: '{"i":3}' });
    expect(seen[2]?.headers).toMatchObject({ host: s.url.slice('http://'.length), 'content-type': 'application/json', 'x-modelmux-model': 'm3', 'content-length': '7' });
  });

  it('sends bodies of every size around the one-buffer limit intact, with latin1 header values', async () => {
    const s = track(
      await httpServer((req, res, body) => {
        res
          .writeHead(200, { 'content-type': 'text/plain' })
          .end(`${req.headers['content-length']} ${Buffer.from(req.headers['x-name'] as string, 'latin1').toString('hex')} ${body.length} ${body.slice(-5)}`);
      }),
    );
    const p = pool(s.url);
    for (const size of [0, 1, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 300_000]) {
      const payload = Buffer.alloc(size, 'b');
      if (size > 0) payload.write('end!.', Math.max(0, size - 5));
      const out = await send(p, { method: 'POST', path: '/p', headers: ['x-name', 'caf\xe9'], body: payload }).done;
      expect(out.error).toBeUndefined();
      expect(out.body).toBe(`${size} 636166e9 ${size} ${payload.toString('latin1').slice(-5)}`);
    }
    expect(s.sockets).toHaveLength(1);
  });

  it('opens at most `connections` sockets and serves the waiting tries in order', async () => {
    const order: string[] = [];
    const s = track(
      await httpServer((req, res) => {
        order.push(req.url ?? '');
        setTimeout(() => res.end(req.url), 30);
      }),
    );
    const p = pool(s.url, 2);
    const tries = ['/a', '/b', '/c', '/d', '/e'].map((path) => send(p, { path }));
    const outs = await Promise.all(tries.map((t) => t.done));
    expect(outs.map((o) => o.body)).toEqual(['/a', '/b', '/c', '/d', '/e']);
    expect(s.sockets).toHaveLength(2);
    expect(order.slice(2)).toEqual(['/c', '/d', '/e']);
  });

  it('reads chunked and HEAD responses and keeps the connection', async () => {
    const s = track(
      await httpServer((req, res) => {
        if (req.method === 'HEAD') return void res.writeHead(200, { 'content-length': '1000' }).end();
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('first ');
        setTimeout(() => res.end('second'), 10);
      }),
    );
    const p = pool(s.url);
    const chunked = await send(p).done;
    expect(fieldValue(chunked.headers ?? [], 'transfer-encoding')).toBe('chunked');
    expect(chunked.body).toBe('first second');
    const head = await send(p, { method: 'HEAD' }).done;
    expect(head).toMatchObject({ status: 200, body: '' });
    expect(head.error).toBeUndefined();
    expect((await send(p).done).body).toBe('first second');
    expect(s.sockets).toHaveLength(1);
  });

  it('hands over body chunks that stay intact while other connections read (one shared read buffer)', async () => {
    // Two large answers at once, each of its own byte: a chunk that were only a view of the
    // shared read buffer would hold the other answer's bytes by the end.
    const s = track(await httpServer((req, res) => res.end(Buffer.alloc(1_500_000, req.url === '/a' ? 'a' : 'b'))));
    const p = pool(s.url);
    const kept = { a: [] as Buffer[], b: [] as Buffer[] };
    const tries = (['a', 'b'] as const).map((name) => {
      const c = new Collector();
      c.onResponseData = (_ctl, chunk) => void kept[name].push(chunk);
      p.dispatch({ method: 'GET', path: `/${name}`, headers: [], body: null }, c);
      return c.done;
    });
    for (const out of await Promise.all(tries)) expect(out.error).toBeUndefined();
    for (const name of ['a', 'b'] as const) {
      expect(kept[name].length).toBeGreaterThan(1);
      const body = Buffer.concat(kept[name]);
      expect(body.length).toBe(1_500_000);
      expect(body.every((byte) => byte === name.charCodeAt(0))).toBe(true);
    }
  });

  it('opens a new connection after Connection: close', async () => {
    const s = track(await httpServer((_req, res) => res.writeHead(200, { connection: 'close', 'content-length': '2' }).end('ok')));
    const p = pool(s.url);
    for (let i = 0; i < 3; i++) expect((await send(p).done).body).toBe('ok');
    expect(s.sockets).toHaveLength(3);
  });

  it("stops reusing a connection before the server's announced keep-alive timeout", async () => {
    const s = track(await httpServer((_req, res) => res.end('ok')));
    // node:http announces `Keep-Alive: timeout=2`; the pool keeps a second's margin.
    s.server.keepAliveTimeout = 2000;
    const p = pool(s.url);
    expect((await send(p).done).body).toBe('ok');
    expect((await send(p).done).body).toBe('ok');
    expect(s.sockets).toHaveLength(1);
    await sleep(1200);
    const late = await send(p).done;
    expect(late.error).toBeUndefined();
    expect(s.sockets).toHaveLength(2);
  });

  it('applies back-pressure: a paused try gets no data until resumed', async () => {
    const big = 'x'.repeat(4 * 1024 * 1024);
    const s = track(await httpServer((_req, res) => res.end(big)));
    const p = pool(s.url);
    let paused = false;
    const c = send(
      p,
      {},
      {
        onData: (ctl, n) => {
          if (n === 1) {
            paused = true;
            ctl.pause();
          } else if (paused) throw new Error('data while paused');
        },
      },
    );
    await sleep(200);
    expect(c.chunks).toBe(1);
    paused = false;
    c.controller?.resume();
    const out = await c.done;
    expect(out.error).toBeUndefined();
    expect(out.body.length).toBe(big.length);
    // The connection is reused after a paused response.
    expect((await send(p).done).body.length).toBe(big.length);
    expect(s.sockets).toHaveLength(1);
  });

  it('aborts a try in flight with the given error and closes its connection', async () => {
    // The server never answers: only the abort can end the try.
    const s = track(await httpServer(() => undefined));
    const p = pool(s.url);
    const c = send(p);
    await sleep(50);
    c.controller?.abort(Object.assign(new Error('given up'), { code: 'GIVEN_UP' }));
    const out = await c.done;
    expect(out.error?.code).toBe('GIVEN_UP');
    expect(out.status).toBeUndefined();
    await sleep(50);
    expect(p.connections).toBe(0);
  });

  it('survives a handler that aborts from inside the last piece of the response', async () => {
    const s = track(await httpServer((_req, res) => res.writeHead(200, { 'content-length': '5' }).end('whole')));
    const p = pool(s.url);
    const out = await send(p, {}, { onData: (ctl) => ctl.abort(new Error('client left')) }).done;
    expect(out.error?.message).toBe('client left');
    expect((await send(p).done).body).toBe('whole');
    expect(s.sockets).toHaveLength(2);
  });

  it('aborts a try that is still waiting for a connection without touching the busy one', async () => {
    const s = track(await httpServer((_req, res) => setTimeout(() => res.end('ok'), 100)));
    const p = pool(s.url, 1);
    const first = send(p);
    const queued = send(p);
    queued.controller?.abort(new Error('not needed'));
    expect((await queued.done).error?.message).toBe('not needed');
    expect((await first.done).body).toBe('ok');
    expect(s.sockets).toHaveLength(1);
  });

  it('close() waits for the try under way and refuses new ones', async () => {
    const s = track(await httpServer((_req, res) => setTimeout(() => res.end('finished'), 100)));
    const p = new UpstreamPool(s.url, { connections: 2, keepAliveTimeoutMs: 10_000 });
    const running = send(p);
    await sleep(20);
    const closed = p.close();
    const refused = await send(p).done;
    expect(refused.error?.code).toBe('UPSTREAM_CLOSED');
    expect((await running.done).body).toBe('finished');
    await closed;
    expect(p.connections).toBe(0);
  });
});

describe('UpstreamPool against servers that misbehave', () => {
  it('reports a refused connection with its code', async () => {
    const s = await listen(createNetServer());
    const url = s.url;
    await new Promise((r) => s.server.close(r));
    const out = await send(pool(url)).done;
    expect(out.error?.code).toBe('ECONNREFUSED');
  });

  it('reports a connection closed before any answer as UPSTREAM_CLOSED', async () => {
    const s = track(await rawServer((socket) => socket.end()));
    const out = await send(pool(s.url)).done;
    expect(out.error?.code).toBe('UPSTREAM_CLOSED');
  });

  it('reads a head and a chunked body that arrive in pieces across reads', async () => {
    const s = track(
      await rawServer((socket) => {
        const pieces = ['HTTP/1.1 200 OK\r\nX-Lo', 'ng-Name: value\r\nTransfer-Encoding: chunked\r\n', '\r\n5\r\nhel', 'lo\r\n', '0\r\n\r\n'];
        pieces.forEach((piece, i) => setTimeout(() => socket.write(piece), 20 * i));
      }),
    );
    const out = await send(pool(s.url)).done;
    expect(out.error).toBeUndefined();
    expect(fieldValue(out.headers ?? [], 'x-long-name')).toBe('value');
    expect(out.body).toBe('hello');
  });

  it('reports a malformed answer as HTTP_PROTOCOL_ERROR and does not reuse the connection', async () => {
    let n = 0;
    const s = track(
      await rawServer((socket) => {
        n++;
        socket.write(n === 1 ? 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nok' : 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
      }),
    );
    const p = pool(s.url);
    expect((await send(p).done).error?.code).toBe('HTTP_PROTOCOL_ERROR');
    expect((await send(p).done).body).toBe('ok');
    expect(s.sockets).toHaveLength(2);
  });

  it('keeps a complete answer but drops the connection when extra bytes follow it', async () => {
    const s = track(await rawServer((socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n')));
    const p = pool(s.url);
    const out = await send(p).done;
    expect(out.error).toBeUndefined();
    expect(out.body).toBe('ok');
    expect((await send(p).done).body).toBe('ok');
    expect(s.sockets).toHaveLength(2);
  });

  it('reports a body cut off mid-way as an error, not a short answer', async () => {
    const s = track(await rawServer((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc')));
    const out = await send(pool(s.url)).done;
    expect(out.status).toBe(200);
    expect(out.error?.code).toBe('HTTP_PROTOCOL_ERROR');
    expect(out.error?.message).toMatch(/cut off/);
  });

  it('ends a body that runs to the close when the server closes', async () => {
    const s = track(await rawServer((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end')));
    const p = pool(s.url);
    const out = await send(p).done;
    expect(out.error).toBeUndefined();
    expect(out.body).toBe('until the end');
    expect((await send(p).done).body).toBe('until the end');
    expect(s.sockets).toHaveLength(2);
  });
});
