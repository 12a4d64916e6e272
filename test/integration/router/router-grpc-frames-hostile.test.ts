import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { eventually } from '../../../harness/eventually.js';
import { startReplica } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { framed, RawGrpcConnection } from '../../../harness/raw-grpc-client.js';
import { ErrorCode, Flag, FrameType, MAX_WINDOW, Setting } from '../../../common/http2/frame-types.js';
import { frame, pingFrame, rstStreamFrame, SETTINGS_ACK, settingsFrame, windowUpdateFrame } from '../../../common/http2/frame-writer.js';
import { MAX_JUNK_FRAMES, MAX_SETTINGS_ENTRIES } from '../../../common/http2/server-connection.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { identityInfer } from '../../helpers/grpc-messages.js';
import { dataFrame, grpcRequestFields, headersFrame, RawH2Clients, type RawH2Client } from '../../helpers/h2-frames.js';
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
let replicaGrpcPort: number;
const clients = new RawH2Clients(() => port);
const replicaClients = new RawH2Clients(() => replicaGrpcPort);
const client = clients.open.bind(clients);

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
  const r = await startReplica({ args: ['--model-source', `file://${models}`, '--write-timeout-ms', '1000'] });
  stops.push(r);
  replicaGrpcPort = Number((r.grpcAddress ?? '').split(':')[1]);
  rt = await startRouter(['--routes', `/w=${r.url}?grpc-port=${(r.grpcAddress ?? '').split(':')[1]}`, '--grpc-framing', 'own', '--write-timeout-ms', '1000', '--keep-alive-timeout-ms', '2000']);
  stops.push(rt);
  port = Number((rt.grpcAddress ?? '').split(':')[1]);
});

afterEach(() => {
  clients.closeAll();
  replicaClients.closeAll();
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

  it('keeps a connection whose client’s message was in flight when the router refused its call', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('NoSuchMethod')));
    await c.closesStream(1);
    c.send(...Array.from({ length: FLOOD }, () => dataFrame(1, Buffer.alloc(16_384))));
    c.send(headersFrame(3, grpcRequestFields('ServerLive')), dataFrame(3, EMPTY_MESSAGE, true));
    await c.closesStream(3, 10_000);
    expect(c.count(FrameType.GOAWAY)).toBe(0);
  });

  it(`ends a connection whose SETTINGS carries more than ${MAX_SETTINGS_ENTRIES} entries (ENHANCE_YOUR_CALM, CVE-2020-11080, as nghttp2)`, async () => {
    const c = await client();
    const entries = Array.from({ length: 2730 }, (_, i): [number, number] => [Setting.INITIAL_WINDOW_SIZE, 65_535 + (i % 2)]);
    c.send(settingsFrame(entries));
    expect(await c.goaway()).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    await stillServes();
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

/** A request head without the fields named. */
function without(...names: string[]): string[] {
  const fields = grpcRequestFields('ServerLive');
  return fields.filter((_, i) => i % 2 === 0 && !names.includes(fields[i] as string)).flatMap((name) => [name, fields[fields.indexOf(name) + 1] as string]);
}

/** A header block of raw HPACK bytes on stream 1. */
const block = (...bytes: number[]): Buffer => frame(FrameType.HEADERS, Flag.END_HEADERS, 1, Buffer.from(bytes));

describe('the router’s own HTTP/2 framing, frame by frame, as nghttp2 answers (RFC 9113, RFC 7541)', () => {
  it.each<[string, Buffer[], number]>([
    ['a dynamic table size update over its 4096', [block(0x3f, 0xe2, 0x1f)], ErrorCode.COMPRESSION_ERROR],
    ['a literal of 2^31-1 bytes', [block(0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x07)], ErrorCode.COMPRESSION_ERROR],
    ['an integer past 2^31', [block(0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x0f)], ErrorCode.COMPRESSION_ERROR],
    ['a Huffman string holding EOS', [block(0x00, 0x84, 0xff, 0xff, 0xff, 0xff, 0x01, 0x61)], ErrorCode.COMPRESSION_ERROR],
    ['a Huffman string padded with zeros', [block(0x00, 0x81, 0x00, 0x01, 0x61)], ErrorCode.COMPRESSION_ERROR],
    ['an index of 0', [block(0x80)], ErrorCode.COMPRESSION_ERROR],
    ['an index past both tables', [block(0xff, 0x49)], ErrorCode.COMPRESSION_ERROR],
    ['a table size update after a field', [block(0x82, 0x20)], ErrorCode.COMPRESSION_ERROR],
    ['HEADERS padding longer than the frame', [frame(FrameType.HEADERS, Flag.PADDED | Flag.END_HEADERS, 1, Buffer.from([5, 0x82]))], ErrorCode.PROTOCOL_ERROR],
    ['DATA padding longer than the frame', [headersFrame(1, grpcRequestFields('ServerLive')), frame(FrameType.DATA, Flag.PADDED, 1, Buffer.from([5, 0, 0]))], ErrorCode.PROTOCOL_ERROR],
    ['a connection WINDOW_UPDATE of 0', [windowUpdateFrame(0, 0)], ErrorCode.PROTOCOL_ERROR],
    ['RST_STREAM on an idle stream', [rstStreamFrame(7, ErrorCode.CANCEL)], ErrorCode.PROTOCOL_ERROR],
    ['WINDOW_UPDATE on an idle stream', [windowUpdateFrame(7, 1)], ErrorCode.PROTOCOL_ERROR],
    ['DATA on an idle stream', [dataFrame(7, EMPTY_MESSAGE)], ErrorCode.PROTOCOL_ERROR],
    ['HEADERS on a lower stream id than the last', [headersFrame(5, grpcRequestFields('ServerLive')), headersFrame(3, grpcRequestFields('ServerLive'))], ErrorCode.STREAM_CLOSED],
    ['a stream that depends on itself', [frame(FrameType.HEADERS, Flag.PRIORITY | Flag.END_HEADERS, 1, Buffer.from([0, 0, 0, 1, 16, 0x82]))], ErrorCode.PROTOCOL_ERROR],
    ['SETTINGS of 5 bytes', [frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(5))], ErrorCode.FRAME_SIZE_ERROR],
    ['a SETTINGS ACK with a payload', [frame(FrameType.SETTINGS, Flag.ACK, 0, Buffer.alloc(6))], ErrorCode.FRAME_SIZE_ERROR],
    ['SETTINGS_ENABLE_PUSH 2', [settingsFrame([[Setting.ENABLE_PUSH, 2]])], ErrorCode.PROTOCOL_ERROR],
    ['SETTINGS_MAX_FRAME_SIZE under 16 KiB', [settingsFrame([[Setting.MAX_FRAME_SIZE, 100]])], ErrorCode.PROTOCOL_ERROR],
    ['SETTINGS_INITIAL_WINDOW_SIZE 2^31', [settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 2 ** 31]])], ErrorCode.FLOW_CONTROL_ERROR],
    ['a PING of 7 bytes', [frame(FrameType.PING, 0, 0, Buffer.alloc(7))], ErrorCode.FRAME_SIZE_ERROR],
    ['PUSH_PROMISE from the client', [frame(FrameType.PUSH_PROMISE, Flag.END_HEADERS, 1, Buffer.alloc(4))], ErrorCode.PROTOCOL_ERROR],
    ['GOAWAY on a stream', [frame(FrameType.GOAWAY, 0, 1, Buffer.alloc(8))], ErrorCode.PROTOCOL_ERROR],
  ])('ends a connection on %s (GOAWAY %d)', async (_what, frames, code) => {
    const c = await client();
    c.send(...frames);
    expect(await c.goaway()).toBe(code);
    await c.closes();
  });

  // Where RFC 9113 makes it a stream error, the connection and its other calls live on (nghttp2 ends the
  // connection for a stream WINDOW_UPDATE of 0, a PRIORITY of 4 bytes and DATA after END_STREAM).
  it.each<[string, Buffer[], number]>([
    ['without :path', [headersFrame(1, without(':path'))], ErrorCode.PROTOCOL_ERROR],
    ['without :method', [headersFrame(1, without(':method'))], ErrorCode.PROTOCOL_ERROR],
    ['without :scheme', [headersFrame(1, without(':scheme'))], ErrorCode.PROTOCOL_ERROR],
    ['without :authority or host', [headersFrame(1, without(':authority'))], ErrorCode.PROTOCOL_ERROR],
    ['with a pseudo-header after a regular field', [headersFrame(1, ['x-a', 'b', ...grpcRequestFields('ServerLive')])], ErrorCode.PROTOCOL_ERROR],
    ['with an unknown pseudo-header', [headersFrame(1, [':foo', 'x', ...grpcRequestFields('ServerLive')])], ErrorCode.PROTOCOL_ERROR],
    ['with a connection field', [headersFrame(1, grpcRequestFields('ServerLive', ['connection', 'keep-alive']))], ErrorCode.PROTOCOL_ERROR],
    ['with te other than trailers', [headersFrame(1, [...without('te'), 'te', 'gzip'])], ErrorCode.PROTOCOL_ERROR],
    ['whose DATA falls short of its content-length', [headersFrame(1, grpcRequestFields('ServerLive', ['content-length', '10'])), dataFrame(1, EMPTY_MESSAGE, true)], ErrorCode.PROTOCOL_ERROR],
    ['whose DATA runs past its content-length', [headersFrame(1, grpcRequestFields('ServerLive', ['content-length', '1'])), dataFrame(1, EMPTY_MESSAGE)], ErrorCode.PROTOCOL_ERROR],
    ['with trailers without END_STREAM', [headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE), headersFrame(1, ['x-t', 'a'])], ErrorCode.PROTOCOL_ERROR],
    ['with a stream WINDOW_UPDATE of 0', [headersFrame(1, grpcRequestFields('ServerLive')), windowUpdateFrame(1, 0)], ErrorCode.PROTOCOL_ERROR],
    ['with a PRIORITY of 4 bytes', [headersFrame(1, grpcRequestFields('ServerLive')), frame(FrameType.PRIORITY, 0, 1, Buffer.alloc(4))], ErrorCode.FRAME_SIZE_ERROR],
    ['with DATA after its END_STREAM', [headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, Buffer.from([0, 0, 0, 0, 10]), true), dataFrame(1, EMPTY_MESSAGE)], ErrorCode.STREAM_CLOSED],
  ])('resets a request %s (RST_STREAM %d) and serves the next on its connection', async (_what, frames, code) => {
    const c = await client();
    c.send(...frames);
    expect(await c.reset(1)).toBe(code);
    c.send(headersFrame(3, grpcRequestFields('ServerLive')), dataFrame(3, EMPTY_MESSAGE, true));
    await c.closesStream(3);
    expect(c.count(FrameType.GOAWAY)).toBe(0);
  });

  it('refuses a header block that decodes past 16 KiB from a few bytes (an HPACK bomb) on its stream, with the router’s memory flat', async () => {
    const rss = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${rt.pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
    const before = rss();
    const c = await client();
    // One 4000-byte entry in the dynamic table, then 12,000 one-byte references to it: 48 MB decoded.
    const entry = Buffer.concat([Buffer.from([0x40, 0x01, 0x78, 0x7f, 0x91, 0x1e]), Buffer.alloc(3984, 0x61)]);
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, 3, Buffer.concat([entry, Buffer.alloc(12_000, 0xbe)])));
    expect(await c.reset(3)).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    expect(rss() - before).toBeLessThan(32 * 1024 * 1024);
    c.send(dataFrame(1, EMPTY_MESSAGE, true));
    await c.closesStream(1);
  });
});

describe('the router’s own HTTP/2 framing against a client that opens no window', () => {
  it('resets an answer the client’s zero window holds, after the write timeout (CANCEL)', async () => {
    const c = await client({ preface: false });
    c.send(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 0]]));
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE, true));
    expect(await c.reset(1, 8000)).toBe(ErrorCode.CANCEL);
  });

  it.each([
    ['the router’s own framing', () => client({ preface: false })],
    ['node:http2 (the replica’s port)', () => replicaClients.open({ preface: false })],
  ])('resets it after the write timeout even while the client keeps the connection busy with PINGs: %s', async (_, open) => {
    const c = await open();
    c.send(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 0]]));
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE, true));
    // Each PING's ACK moves the connection's bytes; none of them is the held answer's.
    const pings = setInterval(() => c.send(pingFrame(Buffer.from('keepbusy', 'latin1'), false)), 200);
    try {
      expect(await c.reset(1, 8000)).toBe(ErrorCode.CANCEL);
    } finally {
      clearInterval(pings);
    }
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
