import * as fc from 'fast-check';
import { credentials, Client, Metadata } from '@grpc/grpc-js';
import { connect as h2connect, createServer as createH2Server, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { CLIENT_PREFACE, ErrorCode, Flag, FrameType } from '../../../common/http2/frame-types.js';
import { ServerConnection } from '../../../common/http2/server-connection.js';
import type { ServerStream } from '../../../common/http2/server-stream.js';
import { framedMessage } from '../../../common/grpc/grpc-frame.js';
import { headersFrame, RawH2Client } from '../../helpers/h2-frames.js';
import { checkSeeded, cuts, mutate, mutations, writesOf } from '../../helpers/http1-fuzz.js';

/**
 * The guard ADR 0055 asks for: the router's own HTTP/2 server connection must take from a
 * client's bytes exactly the calls node:http2 (nghttp2) takes. Byte streams real clients wrote
 * (node:http2's and grpc-js's, captured on their way to a node:http2 server: HPACK with its
 * dynamic table and Huffman strings, several calls per connection, messages over several DATA
 * frames), split into writes at any byte and now and then mutated, go to a server of each
 * framing; each records the calls it gets (path, headers, message bytes, whether the request
 * ended) and answers every ended call. The calls, which streams were answered or reset, and
 * whether the connection got a GOAWAY must agree; error codes may differ (docs/adr/0055 lists
 * the deliberate differences). H2_FUZZ_SEED and H2_FUZZ_RUNS vary the cases.
 */

const SEED = Number(process.env['H2_FUZZ_SEED'] ?? 20261206);
const RUNS = Number(process.env['H2_FUZZ_RUNS'] ?? 200);
const TIME_LIMIT_MS = 25_000;
/** Ends every byte stream (a stream id past any a client used, its block literal): once it is answered, everything before it was read. */
const SENTINEL_ID = 2 ** 31 - 1;
const SENTINEL = headersFrame(SENTINEL_ID, [':method', 'POST', ':scheme', 'http', ':path', '/--end', ':authority', 's'], { end: true });
/** A connection that neither answers the sentinel nor closes by then is stalled (a frame waits for bytes). */
const STALL_MS = 400;
const MAX_CONCURRENT_STREAMS = 8;
const MAX_HEADER_LIST_BYTES = 16 * 1024;
const MAX_MESSAGE_BYTES = 1024 * 1024;

interface Seen {
  path: string;
  headers: string;
  body: string;
  complete: boolean;
}

interface Outcome {
  end: 'sentinel' | 'closed' | 'stalled';
  calls: Seen[];
  answered: number[];
  reset: number[];
  goaway: boolean;
}

/** node:http2's headers as one comparable text: names sorted, values as given. */
function headerText(h: IncomingHttpHeaders): string {
  return JSON.stringify(
    Object.keys(h)
      .sort()
      .map((k) => [k, h[k]]),
  );
}

/** Records each call per client port and answers it once its request ended, its message echoed. */
class Recorder {
  readonly byPort = new Map<number, Seen[]>();

  handle(stream: ServerStream | ServerHttp2Stream, headers: IncomingHttpHeaders, port: number): void {
    const seen: Seen = { path: String(headers[':path']), headers: headerText(headers), body: '', complete: false };
    const calls = this.byPort.get(port) ?? [];
    calls.push(seen);
    this.byPort.set(port, calls);
    const chunks: Buffer[] = [];
    stream.on('error', () => undefined);
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.once('end', () => {
      seen.complete = true;
      seen.body = Buffer.concat(chunks).toString('hex');
      try {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(Buffer.concat(chunks));
      } catch {
        // Closed under the answer.
      }
    });
  }
}

interface Side {
  port: number;
  recorder: Recorder;
  close(): void;
}

async function listen(server: Server | Http2Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function ownSide(): Promise<Side> {
  const recorder = new Recorder();
  const server = createServer((socket) => {
    const port = socket.remotePort ?? 0;
    new ServerConnection(
      socket,
      { maxConcurrentStreams: MAX_CONCURRENT_STREAMS, maxHeaderListBytes: MAX_HEADER_LIST_BYTES, maxMessageBytes: MAX_MESSAGE_BYTES },
      { stream: (s, h) => recorder.handle(s, h, port), close: () => undefined },
    );
  });
  return { port: await listen(server), recorder, close: () => server.close() };
}

async function nghttp2Side(): Promise<Side> {
  const recorder = new Recorder();
  const server = createH2Server({ settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS, maxHeaderListSize: MAX_HEADER_LIST_BYTES, enablePush: false }, maxHeaderListPairs: 128 });
  server.on('stream', (s, h) => recorder.handle(s, h, s.session?.socket.remotePort ?? 0));
  server.on('sessionError', () => undefined);
  return { port: await listen(server), recorder, close: () => server.close() };
}

/** Sends `writes` to `side` and waits until its server has gone quiet; what it took and answered. */
async function outcomeOf(side: Side, writes: readonly Buffer[]): Promise<Outcome> {
  const c = await RawH2Client.open(side.port, { preface: false });
  const port = c.localPort;
  for (const w of [...writes, SENTINEL]) {
    c.send(w);
    await new Promise((r) => setImmediate(r));
  }
  const end = await Promise.race([
    c.closesStream(SENTINEL_ID, STALL_MS).then(
      () => 'sentinel' as const,
      () => 'stalled' as const,
    ),
    c.closes(STALL_MS).then(
      () => 'closed' as const,
      () => 'stalled' as const,
    ),
  ]);
  c.close();
  const calls = side.recorder.byPort.get(port) ?? [];
  side.recorder.byPort.delete(port);
  const ids = (pick: (f: { type: number; flags: number }) => boolean): number[] => [...new Set(c.frames.filter(pick).map((f) => f.streamId))].sort((a, b) => a - b);
  const goaway = c.frames.some((f) => f.type === FrameType.GOAWAY && f.payload.readUInt32BE(4) !== ErrorCode.NO_ERROR);
  // A connection error is the outcome of every stream still open: whether an answer the handler
  // wrote went out before the GOAWAY is the order of nghttp2's callbacks, not what was parsed.
  return {
    end,
    calls,
    answered: goaway ? [] : ids((f) => f.type === FrameType.HEADERS && (f.flags & Flag.END_STREAM) !== 0),
    reset: goaway ? [] : ids((f) => f.type === FrameType.RST_STREAM),
    goaway,
  };
}

/** Captures what clients write: a proxy in front of a node:http2 server keeps each connection's client bytes. */
async function captureClients(): Promise<Buffer[]> {
  const target = await nghttp2Side();
  const streams: Buffer[][] = [];
  const proxy = createServer((socket: Socket) => {
    const bytes: Buffer[] = [];
    streams.push(bytes);
    const up = connect(target.port, '127.0.0.1');
    socket.on('data', (d: Buffer) => {
      bytes.push(Buffer.from(d));
      up.write(d);
    });
    up.pipe(socket);
    socket.on('close', () => up.destroy());
    up.on('close', () => socket.destroy());
    socket.on('error', () => undefined);
    up.on('error', () => undefined);
  });
  const port = await listen(proxy);
  const message = (n: number): Buffer => framedMessage(Buffer.alloc(n, 0x61));
  const h2Calls = async (calls: { headers: Record<string, string | string[]>; body: Buffer }[]): Promise<void> => {
    const s = h2connect(`http://127.0.0.1:${port}`);
    await Promise.all(
      calls.map(
        (call) =>
          new Promise<void>((resolve) => {
            const req = s.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers', ...call.headers });
            req.on('error', () => resolve());
            req.resume();
            req.on('close', () => resolve());
            req.end(call.body);
          }),
      ),
    );
    await new Promise<void>((resolve) => s.close(resolve));
  };
  await h2Calls([{ headers: { 'x-request-id': 'r1' }, body: message(10) }]);
  await h2Calls([
    { headers: { 'x-modelmux-route': 'wine', 'grpc-timeout': '5S' }, body: message(0) },
    { headers: { 'x-modelmux-route': 'wine', 'grpc-timeout': '5S', 'x-dup': ['a', 'b'] }, body: message(40_000) },
    { headers: { 'x-modelmux-route': 'wine', cookie: 'a=1', 'user-agent': 'u' }, body: message(300) },
  ]);
  await h2Calls([{ headers: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`x-field-${i}`, `value ${i} ${'v'.repeat(i * 7)}`])), body: message(70) }]);
  const grpc = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
  for (const n of [5, 2000]) {
    const md = new Metadata();
    md.set('x-request-id', `grpc-js-${n}`);
    md.set('x-modelmux-route', 'wine');
    await new Promise<void>((resolve) => {
      grpc.makeUnaryRequest(
        '/inference.GRPCInferenceService/ModelInfer',
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.alloc(n, 0x62),
        md,
        () => resolve(),
      );
    });
  }
  grpc.close();
  proxy.close();
  target.close();
  return streams.map((b) => withoutGoaway(Buffer.concat(b))).filter((b) => b.length > 0);
}

/** A client's bytes without its GOAWAY, after which a server takes no new stream (the sentinel). */
function withoutGoaway(bytes: Buffer): Buffer {
  const kept: Buffer[] = [bytes.subarray(0, CLIENT_PREFACE.length)];
  for (let at = CLIENT_PREFACE.length; at + 9 <= bytes.length;) {
    const end = at + 9 + bytes.readUIntBE(at, 3);
    if (bytes[at + 3] !== FrameType.GOAWAY) kept.push(bytes.subarray(at, end));
    at = end;
  }
  return Buffer.concat(kept);
}

let own: Side;
let ng: Side;
let captured: Buffer[];

beforeAll(async () => {
  captured = await captureClients();
  own = await ownSide();
  ng = await nghttp2Side();
}, 30_000);

afterAll(() => {
  own.close();
  ng.close();
});

describe('the router’s own HTTP/2 framing, against node:http2 on the same bytes', () => {
  it('captured byte streams of node:http2 and grpc-js clients', () => {
    expect(captured.length).toBeGreaterThanOrEqual(4);
  });

  it('takes the same calls from real clients’ bytes, whole and a byte at a time', async () => {
    for (const bytes of captured) {
      for (const writes of [[bytes], [...bytes].map((b) => Buffer.from([b]))]) {
        const [a, b] = await Promise.all([outcomeOf(own, writes), outcomeOf(ng, writes)]);
        expect(a.calls.length).toBeGreaterThan(1);
        expect(a.end).toBe('sentinel');
        expect(a).toEqual(b);
      }
    }
  }, 20_000);

  it(
    'agrees with node:http2 on split and mutated client bytes',
    async () => {
      const property = fc.asyncProperty(fc.record({ which: fc.nat(), mutated: mutations, at: cuts }), async ({ which, mutated, at }) => {
        const bytes = captured[which % captured.length] as Buffer;
        const writes = writesOf(mutate(bytes.toString('latin1'), mutated), at);
        const [a, b] = await Promise.all([outcomeOf(own, writes), outcomeOf(ng, writes)]);
        expect(a).toEqual(b);
      });
      await checkSeeded(property, SEED, RUNS, TIME_LIMIT_MS);
    },
    TIME_LIMIT_MS + 20_000,
  );
});
