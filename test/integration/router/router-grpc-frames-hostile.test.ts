import { rm } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { eventually } from '../../../harness/eventually.js';
import { startReplica } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { framed, RawGrpcConnection } from '../../../harness/raw-grpc-client.js';
import { ErrorCode, Flag, FrameType, MAX_WINDOW, Setting } from '../../../common/http2/frame-types.js';
import { frame, pingFrame, rstStreamFrame, SETTINGS_ACK, settingsFrame, windowUpdateFrame } from '../../../common/http2/frame-writer.js';
import { MAX_JUNK_FRAMES } from '../../../common/http2/server-connection.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { identityInfer } from '../../helpers/grpc-messages.js';
import { dataFrame, grpcRequestFields, headersFrame, RawH2Client } from '../../helpers/h2-frames.js';
import { modelFolder } from '../../helpers/wine-folder.js';

// ADR 0055, red-teamed: what an attacker's cheap frames and a strict reading of RFC 9113 do to
// the router's own HTTP/2 framing, frame by frame against the real router process. Each flood
// must meet a bound while a well-behaved client's call on another connection is answered.

jest.setTimeout(60_000);

const EMPTY_MESSAGE = framed(Buffer.alloc(0));
const FLOOD = MAX_JUNK_FRAMES + 50;
let models: string;
let rt: RouterProcess;
let port: number;
const stops: { stop(graceMs?: number): Promise<number | null> }[] = [];
const clients: RawH2Client[] = [];

async function client(o: Parameters<typeof RawH2Client.open>[1] = {}): Promise<RawH2Client> {
  const c = await RawH2Client.open(port, o);
  clients.push(c);
  return c;
}

/** A well-behaved client's call on a fresh connection is answered within 2 s. */
async function stillServes(): Promise<void> {
  const started = Date.now();
  const c = await RawGrpcConnection.open(rt.grpcAddress as string);
  try {
    expect((await c.call('ServerLive', EMPTY_MESSAGE).answer).grpcStatus).toBe(0);
  } finally {
    c.close();
  }
  expect(Date.now() - started).toBeLessThan(2000);
}

const metric = async (key: string): Promise<number> => (await rt.metrics()).get(key) ?? 0;

/** `n` RST_STREAMs came, or the connection's GOAWAY. */
async function answered(c: RawH2Client, n: number): Promise<void> {
  await eventually(
    () => {
      if (c.count(FrameType.RST_STREAM) < n && c.count(FrameType.GOAWAY) === 0) throw new Error(`${c.count(FrameType.RST_STREAM)} resets, not ${n}`);
    },
    5000,
    5,
  );
}

/** Stream 1 answered and closed both ways. */
async function afterOneCall(c: RawH2Client): Promise<void> {
  c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE, true));
  await c.closesStream(1);
}

/** Stream 1 refused by this side (a malformed request head): its id is one this side reset. */
async function afterRefusedStream(c: RawH2Client): Promise<void> {
  c.send(headersFrame(1, [':bogus', 'x', ...grpcRequestFields('ServerLive')]));
  expect(await c.reset(1)).toBe(ErrorCode.PROTOCOL_ERROR);
}

beforeAll(async () => {
  models = await modelFolder('router-grpc-frames-hostile-', { identity: identityModel('float32') });
  const r = await startReplica({ args: ['--model-source', `file://${models}`] });
  stops.push(r);
  rt = await startRouter(['--routes', `/w=${r.url}?grpc-port=${(r.grpcAddress ?? '').split(':')[1]}`, '--grpc-framing', 'own', '--write-timeout-ms', '1000', '--keep-alive-timeout-ms', '2000']);
  stops.push(rt);
  port = Number((rt.grpcAddress ?? '').split(':')[1]);
});

afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

afterAll(async () => {
  await Promise.all(stops.map((p) => p.stop(5000)));
  await rm(models, { recursive: true, force: true });
});

describe('the router’s own HTTP/2 framing against floods of frames that cost nothing to send', () => {
  it.each<[string, (c: RawH2Client) => void | Promise<void>]>([
    ['unsolicited SETTINGS acks', (c: RawH2Client): void => c.send(...Array.from({ length: FLOOD }, () => SETTINGS_ACK))],
    ['unsolicited PING acks', (c: RawH2Client): void => c.send(...Array.from({ length: FLOOD }, () => pingFrame(Buffer.alloc(8), true)))],
    [
      'RST_STREAMs of a closed stream',
      async (c: RawH2Client): Promise<void> => {
        await afterOneCall(c);
        c.send(...Array.from({ length: FLOOD }, () => rstStreamFrame(1, ErrorCode.CANCEL)));
      },
    ],
    [
      'WINDOW_UPDATEs of a closed stream',
      async (c: RawH2Client): Promise<void> => {
        await afterOneCall(c);
        c.send(...Array.from({ length: FLOOD }, () => windowUpdateFrame(1, 1)));
      },
    ],
    [
      'empty DATA frames on a stream the router reset',
      async (c: RawH2Client): Promise<void> => {
        await afterRefusedStream(c);
        c.send(...Array.from({ length: FLOOD }, () => dataFrame(1, Buffer.alloc(0))));
      },
    ],
    [
      'header blocks on a stream the router reset',
      async (c: RawH2Client): Promise<void> => {
        await afterRefusedStream(c);
        c.send(...Array.from({ length: FLOOD }, () => headersFrame(1, ['x-trailer', 'y'], { end: true })));
      },
    ],
    [
      'PRIORITY frames of a wrong length, sent as their resets are read',
      async (c: RawH2Client): Promise<void> => {
        // Read as they come, the resets owed never queue up: only a count of such frames bounds them.
        for (let sent = 0; sent < FLOOD && !c.closed; sent += 100) {
          c.send(...Array.from({ length: 100 }, (_, i) => frame(FrameType.PRIORITY, 0, 2 * (sent + i) + 1, Buffer.alloc(4))));
          await answered(c, sent + 100);
        }
      },
    ],
  ])(`ends a connection of more than ${MAX_JUNK_FRAMES} %s (ENHANCE_YOUR_CALM) and serves others meanwhile`, async (_what, flood) => {
    const c = await client();
    await flood(c);
    const [code] = await Promise.all([c.goaway(), stillServes()]);
    expect(code).toBe(ErrorCode.ENHANCE_YOUR_CALM);
  });
});

describe('the router’s own HTTP/2 framing against a strict reading of RFC 9113', () => {
  it('ends a connection on a HEADERS with PRIORITY shorter than its 5-byte priority fields (FRAME_SIZE_ERROR, as nghttp2)', async () => {
    const c = await client();
    c.send(frame(FrameType.HEADERS, Flag.PRIORITY | Flag.END_HEADERS, 1, Buffer.alloc(3)));
    expect(await c.goaway()).toBe(ErrorCode.FRAME_SIZE_ERROR);
    await stillServes();
  });

  it('resets a request whose field name has an upper-case letter (PROTOCOL_ERROR, RFC 9113 §8.2.1, as nghttp2)', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive', ['X-Upper', 'a'])), dataFrame(1, EMPTY_MESSAGE, true));
    expect(await c.reset(1)).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  it.each([
    ['pseudo-headers in its trailers', [':path', '/inference.GRPCInferenceService/ServerLive']],
    ['a connection-specific field in its trailers', ['connection', 'close']],
  ])('resets a request with %s (PROTOCOL_ERROR, RFC 9113 §8.1, as nghttp2)', async (_what, trailer) => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE), headersFrame(1, trailer, { end: true }));
    expect(await c.reset(1)).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  it('resets a request with two content-length fields (PROTOCOL_ERROR, as nghttp2)', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive', ['content-length', '5', 'content-length', '6'])), dataFrame(1, EMPTY_MESSAGE, true));
    expect(await c.reset(1)).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  it.each([0, 100])('answers a node:http2 client whose SETTINGS_HEADER_TABLE_SIZE is %d (a table size update opens the next header block, RFC 7541 §4.2)', async (headerTableSize) => {
    const c = await RawGrpcConnection.open(rt.grpcAddress as string, { settings: { headerTableSize } });
    try {
      for (let i = 0; i < 2; i++) expect((await c.call('ServerLive', EMPTY_MESSAGE).answer).grpcStatus).toBe(0);
    } finally {
      c.close();
    }
  });

  it('finishes an open call after the client’s GOAWAY', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), frame(FrameType.GOAWAY, 0, 0, Buffer.alloc(8)));
    c.send(dataFrame(1, EMPTY_MESSAGE, true));
    await c.closesStream(1);
    expect(c.frames.some((f) => f.type === FrameType.RST_STREAM && f.streamId === 1)).toBe(false);
  });

  it('ends a connection whose header block never ends (the idle timeout)', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive'), { endHeaders: false }));
    await c.closes(10_000);
  });
});

describe('the router’s own HTTP/2 framing against a client that opens no window', () => {
  it('resets an answer the client’s zero window holds, after the write timeout (CANCEL)', async () => {
    const c = await client({ preface: false });
    c.send(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 0]]));
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE, true));
    expect(await c.reset(1, 8000)).toBe(ErrorCode.CANCEL);
  });

  it('keeps the answers of a client that does not read in their streams past a socket’s worth, so that the write timeout frees them', async () => {
    const c = await client({ paused: true });
    c.send(settingsFrame([[Setting.INITIAL_WINDOW_SIZE, MAX_WINDOW]]), windowUpdateFrame(0, MAX_WINDOW - 65_535));
    const timedOut = await metric('modelmux_router_timeouts_total{phase="downstream_write"}');
    const message = framed(identityInfer(80_000));
    const ids = Array.from({ length: 16 }, (_, i) => 2 * i + 1);
    for (const id of ids) {
      c.send(headersFrame(id, grpcRequestFields('ModelInfer')));
      for (let at = 0; at < message.length; at += 16_384) c.send(dataFrame(id, message.subarray(at, at + 16_384), at + 16_384 >= message.length));
    }
    // The kernel's buffers (4 MiB here) take a few answers whole; the others wait and are reset.
    await eventually(async () => expect(await metric('modelmux_router_timeouts_total{phase="downstream_write"}')).toBeGreaterThanOrEqual(timedOut + ids.length - 5), 20_000, 50);
    c.resume();
    for (const id of ids) await c.closesStream(id, 10_000);
    // What reaches the client of 16 answers of 1 MB each is what the kernel's buffers took before the
    // resets: the rest was never handed to the socket, and went with the streams.
    const delivered = c.frames.filter((f) => f.type === FrameType.DATA).reduce((n, f) => n + f.payload.length, 0);
    expect(delivered).toBeLessThan(8 * 1024 * 1024);
  });

  it('resumes an answer after SETTINGS_INITIAL_WINDOW_SIZE makes its window negative and then positive', async () => {
    const c = await client({ preface: false });
    c.send(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 3]]));
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE, true));
    await c.has(FrameType.DATA, 1);
    c.send(settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 0]]));
    c.send(settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 65_535]]));
    await c.closesStream(1);
    const body = Buffer.concat(c.frames.filter((f) => f.type === FrameType.DATA && f.streamId === 1).map((f) => f.payload));
    expect(body.length).toBe(5 + body.readUInt32BE(1));
    expect(c.frames.some((f) => f.type === FrameType.RST_STREAM)).toBe(false);
  });
});
