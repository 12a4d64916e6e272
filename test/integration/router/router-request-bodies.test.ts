import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect, jest } from '@jest/globals';
import { eventually } from '../../../harness/eventually.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { bodyOf, digest } from '../../helpers/body-digests.js';
import { readRequests } from '../../helpers/raw-requests.js';

jest.setTimeout(120_000);

/**
 * The router reads a large request body into a buffer it reuses for later requests
 * (router/exchange/body-buffer.ts). A buffer handed on while a write to a replica still sends it,
 * or while another request's bytes are being read into it, would put one request's bytes into
 * another's: these requests carry different contents, and the replica (a raw TCP server on
 * loopback, as it is about the bytes it receives) records a digest of every body it gets.
 */

const TABLE = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}';

function answer(body: string): string {
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

interface BodyReplica {
  url: string;
  server: Server;
  /** The digest of each body received, by the request's x-request-id. */
  received: Map<string, string>;
}

/**
 * A replica that answers model `early` as soon as a request's head is in, then stops reading for
 * `pauseMs` before it takes the body (so the router's write of it is still under way after the
 * exchange has ended), and model `late` once the whole body is in, with its digest.
 */
async function bodyReplica(pauseMs: number): Promise<BodyReplica> {
  const received = new Map<string, string>();
  const server = createServer((socket: Socket) => {
    readRequests(socket, {
      head: (head) => {
        if (!/^\S+ \/v2\/models\/early\/infer /.test(head.text)) return;
        socket.write(answer('{}'));
        socket.pause();
        setTimeout(() => socket.resume(), pauseMs);
      },
      request: (head, body) => {
        const model = /^\S+ \/v2\/models\/([^/]+)\/infer /.exec(head.text)?.[1];
        if (model === undefined) {
          socket.write(TABLE);
          return;
        }
        received.set(/\r\nx-request-id: *(\S+)/i.exec(head.text)?.[1] ?? '?', digest(body));
        if (model === 'late') socket.write(answer(JSON.stringify({ digest: digest(body) })));
      },
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, received };
}

async function infer(router: RouterProcess, model: string, id: string, body: Buffer): Promise<{ status: number; text: string }> {
  const res = await fetch(`${router.url}/r/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'x-request-id': id },
    body,
  });
  return { status: res.status, text: await res.text() };
}

let replica: BodyReplica | undefined;
let router: RouterProcess | undefined;

afterEach(async () => {
  await router?.stop(5000);
  router = undefined;
  await new Promise((r) => replica?.server.close(r) ?? r(undefined));
  replica = undefined;
});

describe('large request bodies through the router', () => {
  it('sends each body whole to the replica while its buffer is reused, even when the replica answers before reading it', async () => {
    replica = await bodyReplica(400);
    router = await startRouter(['--routes', `/r=${replica.url}`, '--max-body-bytes', '64Mi']);
    // Larger than what loopback's socket buffers take while the replica does not read.
    const bodies = [1, 2, 3, 4].map((seed) => bodyOf(seed, 24 * 1024 ** 2));
    for (const [i, body] of bodies.entries()) {
      // Each answer comes while the body of its request is still being written to the replica.
      const a = await infer(router, 'early', `early-${i}`, body);
      expect(a.status).toBe(200);
    }
    const r = replica;
    await eventually(() => expect(r.received.size).toBe(bodies.length), 60_000, 100);
    for (const [i, body] of bodies.entries()) expect(r.received.get(`early-${i}`)).toBe(digest(body));
  });

  it('keeps concurrent bodies of different contents apart', async () => {
    replica = await bodyReplica(0);
    router = await startRouter(['--routes', `/r=${replica.url}`, '--max-body-bytes', '64Mi']);
    const bodies = [1, 2, 3, 4, 5, 6].map((seed) => bodyOf(seed, 4 * 1024 ** 2 + seed * 1000));
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(bodies.map((body, i) => infer(router as RouterProcess, 'late', `late-${round}-${i}`, body)));
      answers.forEach((a, i) => {
        expect(a.status).toBe(200);
        expect(JSON.parse(a.text)).toEqual({ digest: digest(bodies[i] as Buffer) });
      });
    }
  });
});
