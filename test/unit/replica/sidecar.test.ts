import { createServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { writeOrder } from '../../../replica/store/model-folders.js';
import { inferenceError, lostModels, slowProbeStreak } from '../../../replica/sidecar/runtime-backend.js';
import { V2RuntimeClient } from '../../../replica/sidecar/v2-runtime-client.js';

describe('sidecar mode, pure parts', () => {
  it('writes the files a runtime scans for after every other file of the folder', () => {
    expect(writeOrder(['model-settings.json', 'model.joblib', 'b/x.bin'])).toEqual(['b/x.bin', 'model.joblib', 'model-settings.json']);
    expect(writeOrder(['config.pbtxt', '1/model.onnx'])).toEqual(['1/model.onnx', 'config.pbtxt']);
  });

  it('forgets models the runtime no longer lists, but not a load that ended after the index was asked for', () => {
    const loadedAt = new Map([
      ['a', 100],
      ['b', 100],
      ['late', 250],
    ]);
    expect(lostModels(loadedAt, 200, new Set(['a']))).toEqual(['b']);
    // A runtime that is not ready holds nothing that was loaded before the look.
    expect(lostModels(loadedAt, 200, undefined)).toEqual(['a', 'b']);
    expect(lostModels(loadedAt, 300, new Set(['a', 'b', 'late']))).toEqual([]);
  });

  it('reads an archive key in the runtime index by its folder name, the key with its slashes as %2F', () => {
    const loadedAt = new Map([['tenant/7/model.tar.gz', 100]]);
    expect(lostModels(loadedAt, 200, new Set(['tenant%2F7%2Fmodel.tar.gz']))).toEqual([]);
    expect(lostModels(loadedAt, 200, new Set(['tenant/7/model.tar.gz']))).toEqual(['tenant/7/model.tar.gz']);
  });

  it("maps a runtime's refusals to the catalogue", () => {
    const answer = (status: number) => ({ status, body: Buffer.from('{"error":"x"}') });
    expect(inferenceError('m', answer(400)).code).toBe('invalid_request');
    expect(inferenceError('m', answer(422)).code).toBe('invalid_request');
    expect(inferenceError('m', answer(404)).code).toBe('runtime_unavailable');
    expect(inferenceError('m', answer(503)).code).toBe('runtime_unavailable');
    expect(inferenceError('m', answer(500)).code).toBe('inference_failed');
  });

  it('counts a runtime that answers not ready at once, and one that is slow only after three slow probes in a row', () => {
    expect(slowProbeStreak(0, false)).toEqual({ streak: 0, counts: true });
    expect(slowProbeStreak(0, true)).toEqual({ streak: 1, counts: false });
    expect(slowProbeStreak(1, true)).toEqual({ streak: 2, counts: false });
    expect(slowProbeStreak(2, true)).toEqual({ streak: 3, counts: true });
    expect(slowProbeStreak(3, true)).toEqual({ streak: 4, counts: true });
    expect(slowProbeStreak(2, false)).toEqual({ streak: 0, counts: true });
  });
});

describe("the runtime client's readiness probe, over a real socket", () => {
  let server: Server;
  let url: string;
  let answer: 'ready' | 'not-ready' | 'hang' = 'ready';

  beforeAll(async () => {
    server = createServer((_req, res) => {
      if (answer === 'hang') return;
      res.writeHead(answer === 'ready' ? 200 : 503).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('tells ready, unready (answered not ready), down (nothing listening) and slow (no answer in time) apart', async () => {
    const client = new V2RuntimeClient({ url, loadTimeoutMs: 1000, probeTimeoutMs: 200 });
    try {
      answer = 'ready';
      expect(await client.ready()).toBe('ready');
      answer = 'not-ready';
      expect(await client.ready()).toBe('unready');
      answer = 'hang';
      expect(await client.ready()).toBe('slow');
    } finally {
      await client.close();
    }
    const nobody = new V2RuntimeClient({ url: 'http://127.0.0.1:1', loadTimeoutMs: 1000, probeTimeoutMs: 200 });
    try {
      expect(await nobody.ready()).toBe('down');
    } finally {
      await nobody.close();
    }
  });
});

describe('the runtime client over a runtime that closes kept-alive connections, over a real socket', () => {
  /** Answers each connection's first request 200 and resets it on the next, as uvicorn after a handler's exception; or resets at once. */
  async function runtime(resetAll: boolean): Promise<{ url: string; connections: () => number; requests: () => number; close: () => Promise<void> }> {
    let connections = 0;
    let requests = 0;
    const server = createNetServer((socket) => {
      connections++;
      let answered = false;
      socket.on('data', (chunk) => {
        if (!chunk.includes('\r\n\r\n')) return;
        requests++;
        if (answered || resetAll) return void socket.resetAndDestroy();
        answered = true;
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return { url, connections: () => connections, requests: () => requests, close: () => new Promise((r) => server.close(() => r())) };
  }

  it('sends a request met by a reset once more on a new connection, and only once', async () => {
    const rt = await runtime(false);
    const client = new V2RuntimeClient({ url: rt.url, loadTimeoutMs: 1000, probeTimeoutMs: 500 });
    try {
      expect(await client.ready()).toBe('ready');
      // The pool takes a connection back a moment after its answer; then the next request reuses it.
      await new Promise((r) => setTimeout(r, 20));
      expect(await client.ready()).toBe('ready');
      expect({ connections: rt.connections(), requests: rt.requests() }).toEqual({ connections: 2, requests: 3 });
    } finally {
      await client.close();
      await rt.close();
    }
    const resets = await runtime(true);
    const broken = new V2RuntimeClient({ url: resets.url, loadTimeoutMs: 1000, probeTimeoutMs: 500 });
    try {
      await expect(broken.load('m')).rejects.toMatchObject({ code: 'runtime_unavailable' });
      expect(resets.requests()).toBe(2);
    } finally {
      await broken.close();
      await resets.close();
    }
  });
});
