import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { refusal, type RefusalReason } from '../../../common/connection-limits.js';
import { ClientConnections, writeStalled } from '../../../router/http1/client-connections.js';
import { eventually } from '../../../harness/eventually.js';
import { RawClient } from '../../helpers/raw-http-client.js';

describe('refusal', () => {
  const limits = { maxConnections: 10, maxConnectionsPerClient: 3 };
  it('refuses past the global limit first, then past the per-address one; 0 means no limit', () => {
    expect(refusal(9, 2, limits)).toBeUndefined();
    expect(refusal(10, 0, limits)).toBe('connections');
    expect(refusal(5, 3, limits)).toBe('client_connections');
    expect(refusal(10, 3, limits)).toBe('connections');
    expect(refusal(1_000_000, 1_000_000, { maxConnections: 0, maxConnectionsPerClient: 0 })).toBeUndefined();
  });
});

describe('writeStalled', () => {
  it('stalls only when queued bytes made no progress for the whole timeout', () => {
    const p = { flushed: 0, movedAt: 0 };
    expect(writeStalled(p, 0, 0, 100, 1000)).toBe(false);
    // Bytes queued, some flushed since: progress.
    expect(writeStalled(p, 500, 1000, 200, 1000)).toBe(false);
    expect(p.movedAt).toBe(200);
    expect(writeStalled(p, 500, 1000, 1100, 1000)).toBe(false);
    expect(writeStalled(p, 500, 1000, 1200, 1000)).toBe(true);
    // A slow but steady reader is never stalled.
    const q = { flushed: 0, movedAt: 0 };
    for (let t = 0, f = 0; t < 10_000; t += 500, f += 10) expect(writeStalled(q, 500, f, t, 1000)).toBe(false);
  });
});

describe('ClientConnections', () => {
  let server: Server;
  let guard: ClientConnections;
  let port: number;
  const refused: RefusalReason[] = [];
  let writeTimeouts = 0;
  const sockets: Socket[] = [];

  beforeEach(async () => {
    refused.length = 0;
    writeTimeouts = 0;
    server = createServer((req, res) => {
      if (req.url === '/large') return void res.end('z'.repeat(8 * 1024 * 1024));
      res.end('ok');
    });
    guard = new ClientConnections(
      server,
      { maxConnections: 4, maxConnectionsPerClient: 3, writeTimeoutMs: 1000, sweepMs: 20 },
      { refused: (r) => void refused.push(r), writeTimedOut: () => void writeTimeouts++ },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });

  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    guard.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  /** A connection from `host` (a 127.0.0.0/8 address), once connected. */
  async function open(host = '127.0.0.1'): Promise<RawClient> {
    const c = new RawClient(port, { localAddress: host });
    sockets.push(c.socket);
    await new Promise<void>((r) => c.socket.once('connect', () => r()));
    return c;
  }

  /** Until the guard tracks `n` connections: a client's `connect` comes before the server's. */
  const tracking = (n: number): Promise<void> => eventually(() => expect(guard.size).toBe(n), 3000, 5);

  it('answers one address past its limit 429 and the router past its limit 503, as JSON with Retry-After, and closes', async () => {
    for (let i = 0; i < 3; i++) await open('127.0.0.1');
    await tracking(3);
    const fourth = (await open('127.0.0.1')).send('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await fourth.until((r) => r.closed)).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n[\s\S]*retry-after: 1\r\n/);
    expect(fourth.json()).toMatchObject({ error: 'client_connection_limit' });
    // Another address still gets in, up to the router's limit of 4.
    await open('127.0.0.2');
    await tracking(4);
    const fifth = await open('127.0.0.3');
    expect(await fifth.until((r) => r.closed)).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n[\s\S]*retry-after: 1\r\n/);
    expect(fifth.json()).toMatchObject({ error: 'connection_limit' });
    expect(refused).toEqual(['client_connections', 'connections']);
    expect(guard.size).toBe(4);
  });

  it('takes connections again as others close', async () => {
    const held = [await open(), await open(), await open()];
    for (const h of held) h.socket.destroy();
    await tracking(0);
    const again = (await open()).send('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await again.until((r) => r.text.endsWith('ok'))).toMatch(/^HTTP\/1\.1 200 /);
    expect(refused).toEqual([]);
  });

  it('closes a connection whose client stops reading its answer after the write timeout', async () => {
    const c = await open();
    c.socket.pause();
    c.send('GET /large HTTP/1.1\r\nHost: x\r\n\r\n');
    // Not closed within the first 200 ms: the time is what this tests.
    await new Promise((r) => setTimeout(r, 200));
    expect(writeTimeouts).toBe(0);
    await tracking(0);
    expect(writeTimeouts).toBe(1);
    // A paused client notices the reset once it reads again.
    c.socket.resume();
    await c.until((r) => r.closed);
  });
});
