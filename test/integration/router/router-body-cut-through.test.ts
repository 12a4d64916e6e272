import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect, jest } from '@jest/globals';
import { eventually } from '../../../harness/eventually.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { RawClient } from '../../helpers/raw-http-client.js';
import { bodyOf, digest } from '../../helpers/body-digests.js';
import { readRequests } from '../../helpers/raw-requests.js';

jest.setTimeout(120_000);

/**
 * The router sends a large body with a Content-Length on to its replica as it arrives, keeping
 * every byte so that a try that fails before any answer is replayed elsewhere (docs/adr/0051,
 * "Router cut-through"). What a replica receives, and when, is what these tests are about, so
 * the replicas are raw TCP servers on loopback that record each request's body bytes as they come
 * and whether its connection closed before the body was whole; a raw server has no timeouts of
 * its own, so a connection it sees closed was closed by the router.
 */

const TABLE = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}';

function answer(json: string): string {
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${json.length}\r\n\r\n${json}`;
}

/** A request as the replica saw it. */
interface Seen {
  bodyBytes: number;
  whole: boolean;
  /** The connection closed before the body was whole. */
  cut: boolean;
}

interface RecordingReplica {
  url: string;
  server: Server;
  /** By x-request-id. */
  seen: Map<string, Seen>;
}

/**
 * Answers each inference request with its body's digest once the body is in; with `reset`, it
 * instead resets the connection at the first body bytes of each inference request, and with
 * `early` it answers `{}` as soon as the head is in (and reads the body on).
 */
async function recordingReplica(behaviour: { reset?: boolean; early?: boolean } = {}): Promise<RecordingReplica> {
  const seen = new Map<string, Seen>();
  const server = createServer((socket: Socket) => {
    let current: Seen | undefined;
    socket.on('close', () => {
      if (current !== undefined && !current.whole) current.cut = true;
    });
    readRequests(socket, {
      head: (head) => {
        if (!/\/infer /.test(head.text)) return;
        current = { bodyBytes: 0, whole: false, cut: false };
        seen.set(/\r\nx-request-id: *(\S+)/i.exec(head.text)?.[1] ?? '?', current);
        if (behaviour.early === true) socket.write(answer('{}'));
      },
      progress: (head, bodyBytes) => {
        if (current === undefined || !/\/infer /.test(head.text)) return;
        current.bodyBytes = bodyBytes;
        if (behaviour.reset === true && bodyBytes > 0) socket.resetAndDestroy();
      },
      request: (head, body) => {
        if (!/\/infer /.test(head.text)) return void socket.write(TABLE);
        if (current !== undefined) current.whole = true;
        current = undefined;
        if (behaviour.early !== true) socket.write(answer(JSON.stringify({ digest: digest(body) })));
      },
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, seen };
}

/** A client that sends the head of a POST of `body` to model `id` and `upTo` bytes of the body, the rest when told. */
function slowUpload(router: RouterProcess, id: string, body: Buffer, upTo: number): RawClient {
  const client = new RawClient(router.port);
  client.send(`POST /r/v2/models/${id}/infer HTTP/1.1\r\nhost: x\r\nx-request-id: ${id}\r\ncontent-type: application/octet-stream\r\ncontent-length: ${body.length}\r\n\r\n`);
  client.send(body.subarray(0, upTo));
  return client;
}

const BODY = 1024 ** 2;
const HALF = BODY / 2;

const replicas: RecordingReplica[] = [];
let router: RouterProcess | undefined;
const clients: RawClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.socket.destroy();
  await router?.stop(5000);
  router = undefined;
  for (const r of replicas.splice(0)) await new Promise((done) => r.server.close(done));
});

async function start(flags: string[], ...rs: RecordingReplica[]): Promise<RouterProcess> {
  replicas.push(...rs);
  router = await startRouter(['--routes', `/r=${rs.map((r) => r.url).join(',')}`, '--max-body-bytes', '64Mi', ...flags]);
  return router;
}

describe('a large body cut through to its replica', () => {
  it('reaches the replica while the client is still sending it, and is answered whole', async () => {
    const replica = await recordingReplica();
    const r = await start([], replica);
    const body = bodyOf(1, BODY);
    const client = slowUpload(r, 'slow-1', body, HALF);
    clients.push(client);
    // The client has sent half and waits: the replica already has it.
    await eventually(() => expect(replica.seen.get('slow-1')?.bodyBytes).toBe(HALF), 10_000, 50);
    client.send(body.subarray(HALF));
    await client.until((c) => c.responses() === 1 && c.body().endsWith('}'), 10_000);
    expect(client.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(client.json()).toEqual({ digest: digest(body) });
  });

  it('times a try from the end of its body, so a client that uploads for longer than the try timeout is answered', async () => {
    const replica = await recordingReplica();
    const r = await start(['--try-timeout-ms', '500', '--body-idle-timeout-ms', '2000'], replica);
    const body = bodyOf(2, BODY);
    const client = slowUpload(r, 'slow-2', body, 0);
    clients.push(client);
    const pieces = 6;
    const end = (piece: number): number => Math.floor((piece * BODY) / pieces);
    for (let i = 0; i < pieces; i++) {
      client.send(body.subarray(end(i), end(i + 1)));
      // Each piece reaches the replica before the next is sent, over more than the try timeout.
      await eventually(() => expect(replica.seen.get('slow-2')?.bodyBytes).toBe(end(i + 1)), 10_000, 20);
      await new Promise((done) => setTimeout(done, 200));
    }
    await client.until((c) => c.responses() === 1 && c.body().endsWith('}'), 10_000);
    expect(client.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(client.json()).toEqual({ digest: digest(body) });
  });

  it('replays the body on another replica when the first resets the connection mid-body', async () => {
    const resetting = await recordingReplica({ reset: true });
    const answering = await recordingReplica();
    const r = await start([], resetting, answering);
    // Each model has its own first choice of the two: send until a request's first try is the resetting one.
    for (let i = 0; i < 40 && resetting.seen.size === 0; i++) {
      const id = `replay-${i}`;
      const body = bodyOf(10 + i, BODY);
      const client = slowUpload(r, id, body, HALF);
      clients.push(client);
      // The first try has the first half, whichever replica it went to; the client sends the rest after.
      await eventually(() => expect(resetting.seen.get(id)?.cut ?? answering.seen.get(id)?.bodyBytes === HALF).toBe(true), 10_000, 20);
      client.send(body.subarray(HALF));
      await client.until((c) => c.responses() === 1 && c.body().endsWith('}'), 10_000);
      expect(client.text).toMatch(/^HTTP\/1\.1 200 /);
      expect(client.json()).toEqual({ digest: digest(body) });
      expect(answering.seen.get(id)?.whole).toBe(true);
    }
    expect(resetting.seen.size).toBeGreaterThan(0);
  });

  it('answers 408 to a client that stalls mid-body and closes the replica connection that carried it', async () => {
    const replica = await recordingReplica();
    const r = await start(['--body-idle-timeout-ms', '600'], replica);
    const client = slowUpload(r, 'stall', bodyOf(3, BODY), HALF);
    clients.push(client);
    await eventually(() => expect(replica.seen.get('stall')?.bodyBytes).toBe(HALF), 10_000, 50);
    await client.until((c) => c.responses() === 1, 10_000);
    expect(client.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(client.text).toContain('"request_timeout"');
    // The replica, which would wait for the rest forever, has its half request cut by the router.
    await eventually(() => expect(replica.seen.get('stall')?.cut).toBe(true), 5_000, 50);
    // And the next request is served on a connection of its own, whole.
    const next = bodyOf(4, BODY);
    const again = slowUpload(r, 'after-stall', next, BODY);
    clients.push(again);
    await again.until((c) => c.responses() === 1 && c.body().endsWith('}'), 10_000);
    expect(again.json()).toEqual({ digest: digest(next) });
  });
});

describe('a body that does not come whole within --body-cut-through-hold-ms', () => {
  it("is taken back from its replica, freeing the replica's slot, and sent whole once it is in", async () => {
    const replica = await recordingReplica();
    // One slot per replica: while the stalled request holds it, no other request could be placed.
    const r = await start(['--body-cut-through-hold-ms', '300', '--max-ongoing-requests', '1', '--request-timeout-ms', '5000'], replica);
    const body = bodyOf(8, BODY);
    const stalled = slowUpload(r, 'held-1', body, HALF);
    clients.push(stalled);
    // The body went on to the replica as it came (how much of the half before the hold ran out is the machine's).
    await eventually(() => expect(replica.seen.get('held-1')?.bodyBytes ?? 0).toBeGreaterThan(0), 10_000, 20);
    // The client sends nothing more: past the hold, the router cuts the try it was cut through on.
    await eventually(() => expect(replica.seen.get('held-1')?.cut).toBe(true), 10_000, 50);
    expect((await r.metrics()).get('modelmux_router_bodies_taken_back_total{route="/r"}')).toBe(1);
    // The slot is free: another client's request for the same model is answered while the first still holds its body.
    const small = bodyOf(9, 1024);
    const other = new RawClient(r.port);
    clients.push(other);
    other.send(`POST /r/v2/models/held-1/infer HTTP/1.1\r\nhost: x\r\nx-request-id: other-1\r\ncontent-type: application/octet-stream\r\ncontent-length: ${small.length}\r\n\r\n`);
    other.send(small);
    await other.until((c) => c.responses() === 1 && c.body().endsWith('}'), 10_000);
    expect(other.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(other.json()).toEqual({ digest: digest(small) });
    expect(stalled.text).toBe('');
    // The rest comes: the request is placed again, and the replica gets the whole body on a new connection.
    stalled.send(body.subarray(HALF));
    await stalled.until((c) => c.responses() === 1 && c.body().endsWith('}'), 10_000);
    expect(stalled.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(stalled.json()).toEqual({ digest: digest(body) });
    expect(replica.seen.get('held-1')).toEqual({ bodyBytes: BODY, whole: true, cut: false });
  });
});

describe('with --body-cut-through=false', () => {
  it('reads the body whole first: a client that stalls mid-body gets 408, and the replica never saw its request', async () => {
    const replica = await recordingReplica();
    const r = await start(['--body-cut-through', 'false', '--body-idle-timeout-ms', '600'], replica);
    const client = slowUpload(r, 'off-stall', bodyOf(7, BODY), HALF);
    clients.push(client);
    await client.until((c) => c.responses() === 1, 10_000);
    expect(client.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(replica.seen.has('off-stall')).toBe(false);
  });
});

describe('an answer that comes before its body is whole', () => {
  it('is held until the body is in, and the replica gets the whole body', async () => {
    const replica = await recordingReplica({ early: true });
    const r = await start([], replica);
    const body = bodyOf(5, BODY);
    const client = slowUpload(r, 'early-1', body, HALF);
    clients.push(client);
    await eventually(() => expect(replica.seen.get('early-1')?.bodyBytes).toBe(HALF), 10_000, 50);
    // The replica answered at the head, before it had these bytes: the client has nothing yet.
    expect(client.text).toBe('');
    client.send(body.subarray(HALF));
    await client.until((c) => c.responses() === 1 && c.body().endsWith('}'), 10_000);
    expect(client.text).toMatch(/^HTTP\/1\.1 200 /);
    await eventually(() => expect(replica.seen.get('early-1')?.whole).toBe(true), 10_000, 50);
  });

  it('is dropped for a 408 when the client stalls, and the replica connection still sending the body is cut', async () => {
    const replica = await recordingReplica({ early: true });
    const r = await start(['--body-idle-timeout-ms', '600'], replica);
    const client = slowUpload(r, 'early-stall', bodyOf(6, BODY), HALF);
    clients.push(client);
    await eventually(() => expect(replica.seen.get('early-stall')?.bodyBytes).toBe(HALF), 10_000, 50);
    await client.until((c) => c.responses() === 1, 10_000);
    expect(client.text).toMatch(/^HTTP\/1\.1 408 /);
    await eventually(() => expect(replica.seen.get('early-stall')?.cut).toBe(true), 5_000, 50);
  });
});
