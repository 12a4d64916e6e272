import { rm } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { eventually } from '../../../harness/eventually.js';
import { startReplica } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { framed, RawGrpcConnection } from '../../../harness/raw-grpc-client.js';
import { ErrorCode, Flag, FrameType, MAX_WINDOW, Setting } from '../../../common/http2/frame-types.js';
import { dataFrames, frame, pingFrame, rstStreamFrame, settingsFrame, windowUpdateFrame } from '../../../common/http2/frame-writer.js';
import { MAX_HEADER_BLOCK_FRAMES, MAX_JUNK_FRAMES, MAX_OWED_CONTROL_FRAMES, MAX_QUEUED_BYTES } from '../../../common/http2/server-connection.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { identityInfer } from '../../helpers/grpc-messages.js';
import { dataFrame, grpcRequestFields, headersFrame, RawH2Client } from '../../helpers/h2-frames.js';
import { modelFolder } from '../../helpers/wine-folder.js';

// ADR 0055: the router's own HTTP/2 framing on its gRPC port, driven frame by frame against the
// real router process: each malformed frame and each flood nghttp2 used to bound ends the
// connection (GOAWAY) or the stream (RST_STREAM) with its code, and the process goes on serving.

jest.setTimeout(120_000);

const EMPTY_MESSAGE = framed(Buffer.alloc(0));
let models: string;
let rt: RouterProcess;
let port: number;
/** The replica's address as a route's, for the routers the tests start. */
let replicaRoute: string;
const stops: { stop(graceMs?: number): Promise<number | null> }[] = [];
const clients: RawH2Client[] = [];

async function client(o: Parameters<typeof RawH2Client.open>[1] = {}): Promise<RawH2Client> {
  const c = await RawH2Client.open(port, o);
  clients.push(c);
  return c;
}

/** A well-behaved client's call on a fresh connection is answered: the process serves on. */
async function stillServes(): Promise<void> {
  const c = await RawGrpcConnection.open(rt.grpcAddress as string);
  try {
    expect((await c.call('ServerLive', EMPTY_MESSAGE).answer).grpcStatus).toBe(0);
  } finally {
    c.close();
  }
}

beforeAll(async () => {
  models = await modelFolder('router-grpc-frames-', { identity: identityModel('float32') });
  const r = await startReplica({ args: ['--model-source', `file://${models}`] });
  stops.push(r);
  replicaRoute = `/w=${r.url}?grpc-port=${(r.grpcAddress ?? '').split(':')[1]}`;
  rt = await startRouter(['--routes', replicaRoute, '--grpc-framing', 'own', '--grpc-max-concurrent-streams', '4']);
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

describe('the router’s own HTTP/2 framing against malformed frames', () => {
  it('answers a call sent frame by frame', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE, true));
    await c.closesStream(1);
    expect(c.count(FrameType.DATA)).toBeGreaterThan(0);
  });

  it('never places a call whose RST_STREAM comes in the same read as the end of its message', async () => {
    const placements = async (): Promise<number> => {
      let n = 0;
      for (const [k, v] of await rt.metrics()) if (k.startsWith('modelmux_router_placements_total{')) n += v;
      return n;
    };
    const before = await placements();
    const c = await client();
    // One socket write: the whole call, then its reset. Its handler runs after the read's last frame.
    c.send(headersFrame(1, grpcRequestFields('ModelInfer')), dataFrame(1, framed(identityInfer(1)), true), rstStreamFrame(1, ErrorCode.CANCEL));
    // The next call on the connection is placed and answered: only it.
    c.send(headersFrame(3, grpcRequestFields('ModelInfer')), dataFrame(3, framed(identityInfer(1)), true));
    await c.closesStream(3);
    expect(c.frames.some((f) => f.streamId === 3 && f.type === FrameType.DATA)).toBe(true);
    expect(c.frames.some((f) => f.streamId === 1 && f.type === FrameType.DATA)).toBe(false);
    expect((await placements()) - before).toBe(1);
  });

  it('answers a call whose request ends with trailers, their fields unread', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE), headersFrame(1, ['x-trailer', 't'], { end: true }));
    await c.closesStream(1);
    expect(c.count(FrameType.RST_STREAM)).toBe(0);
    expect(c.count(FrameType.DATA)).toBeGreaterThan(0);
  });

  it('ends a connection that does not open with the client preface (GOAWAY PROTOCOL_ERROR)', async () => {
    const c = await client({ preface: false });
    c.send(Buffer.from('GET / HTTP/1.1\r\nHost: r\r\n\r\n'));
    expect(await c.goaway()).toBe(ErrorCode.PROTOCOL_ERROR);
    await c.closes();
    await stillServes();
  });

  it('ends a connection on a frame longer than its SETTINGS_MAX_FRAME_SIZE of 16 KiB (FRAME_SIZE_ERROR)', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), frame(FrameType.DATA, 0, 1, Buffer.alloc(16_385)));
    expect(await c.goaway()).toBe(ErrorCode.FRAME_SIZE_ERROR);
    await c.closes();
    await stillServes();
  });

  it('ends a connection whose client opens a stream of an even id (PROTOCOL_ERROR)', async () => {
    const c = await client();
    c.send(headersFrame(2, grpcRequestFields('ServerLive')));
    expect(await c.goaway()).toBe(ErrorCode.PROTOCOL_ERROR);
    await stillServes();
  });

  it('resets a stream that gets DATA after it closed (STREAM_CLOSED)', async () => {
    const c = await client();
    c.send(headersFrame(1, grpcRequestFields('ServerLive')), dataFrame(1, EMPTY_MESSAGE, true));
    await c.closesStream(1);
    c.send(dataFrame(1, EMPTY_MESSAGE));
    expect(await c.reset(1)).toBe(ErrorCode.STREAM_CLOSED);
    c.send(headersFrame(3, grpcRequestFields('ServerLive')), dataFrame(3, EMPTY_MESSAGE, true));
    await c.closesStream(3);
  });

  it('ends a connection whose window the client grows past 2^31-1 (FLOW_CONTROL_ERROR)', async () => {
    const c = await client();
    c.send(windowUpdateFrame(0, MAX_WINDOW));
    expect(await c.goaway()).toBe(ErrorCode.FLOW_CONTROL_ERROR);
    await stillServes();
  });

  it('ends a connection on a CONTINUATION without its HEADERS, or a frame inside a header block (PROTOCOL_ERROR)', async () => {
    const orphan = await client();
    orphan.send(frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, Buffer.alloc(0)));
    expect(await orphan.goaway()).toBe(ErrorCode.PROTOCOL_ERROR);
    const interleaved = await client();
    interleaved.send(headersFrame(1, grpcRequestFields('ServerLive'), { endHeaders: false }), pingFrame(Buffer.alloc(8), false));
    expect(await interleaved.goaway()).toBe(ErrorCode.PROTOCOL_ERROR);
    await stillServes();
  });

  it('refuses a stream past SETTINGS_MAX_CONCURRENT_STREAMS (REFUSED_STREAM) and answers the others', async () => {
    const c = await client();
    for (const id of [1, 3, 5, 7]) c.send(headersFrame(id, grpcRequestFields('ServerLive')));
    c.send(headersFrame(9, grpcRequestFields('ServerLive')));
    expect(await c.reset(9)).toBe(ErrorCode.REFUSED_STREAM);
    c.send(dataFrame(1, EMPTY_MESSAGE, true));
    await c.closesStream(1);
  });

  it('refuses a request head over SETTINGS_MAX_HEADER_LIST_SIZE (16 KiB) on its stream and keeps the connection', async () => {
    const big = await client();
    big.send(headersFrame(1, grpcRequestFields('ServerLive', ['x-big', 'a'.repeat(15_000), 'x-big2', 'b'.repeat(2000)])));
    expect(await big.reset(1)).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    big.send(headersFrame(3, grpcRequestFields('ServerLive')), dataFrame(3, EMPTY_MESSAGE, true));
    await big.closesStream(3);
  });

  it('delivers an answer larger than the client’s window as the client opens it (send-side flow control)', async () => {
    const c = await RawGrpcConnection.open(rt.grpcAddress as string, { settings: { initialWindowSize: 100 } });
    try {
      const message = identityInfer(20_000);
      const a = await c.call('ModelInfer', framed(message)).answer;
      expect(a.grpcStatus).toBe(0);
      expect(a.body.length).toBeGreaterThan(80_000);
    } finally {
      c.close();
    }
  });
});

describe('the router’s own HTTP/2 framing against floods', () => {
  it(`ends a connection that owes more than ${MAX_OWED_CONTROL_FRAMES} PING acks at once (ENHANCE_YOUR_CALM)`, async () => {
    const c = await client();
    c.send(...Array.from({ length: MAX_OWED_CONTROL_FRAMES + 500 }, () => pingFrame(Buffer.alloc(8), false)));
    expect(await c.goaway()).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    await c.closes();
    await stillServes();
  });

  it(`ends a connection that owes more than ${MAX_OWED_CONTROL_FRAMES} SETTINGS acks at once (ENHANCE_YOUR_CALM)`, async () => {
    const c = await client();
    c.send(...Array.from({ length: MAX_OWED_CONTROL_FRAMES + 500 }, () => settingsFrame([])));
    expect(await c.goaway()).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    await stillServes();
  });

  it('answers pings that come at a client’s pace', async () => {
    const c = await client();
    for (let i = 0; i < 20; i++) c.send(pingFrame(Buffer.alloc(8, i), false));
    await c.has(FrameType.PING, 20);
    expect(c.count(FrameType.GOAWAY)).toBe(0);
  });

  it.each([
    ['empty DATA frames', (c: RawH2Client): void => c.send(headersFrame(1, grpcRequestFields('ServerLive')), ...Array.from({ length: MAX_JUNK_FRAMES + 10 }, () => dataFrame(1, Buffer.alloc(0))))],
    ['PRIORITY frames', (c: RawH2Client): void => c.send(...Array.from({ length: MAX_JUNK_FRAMES + 10 }, () => frame(FrameType.PRIORITY, 0, 1, Buffer.alloc(5))))],
    ['frames of unknown types', (c: RawH2Client): void => c.send(...Array.from({ length: MAX_JUNK_FRAMES + 10 }, () => frame(0xfa, 0, 0, Buffer.alloc(4))))],
  ])(`ends a connection of more than ${MAX_JUNK_FRAMES} %s (ENHANCE_YOUR_CALM)`, async (_what, flood) => {
    const c = await client();
    flood(c);
    expect(await c.goaway()).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    await stillServes();
  });

  it(`ends a connection whose header block runs past ${MAX_HEADER_BLOCK_FRAMES} CONTINUATIONs or 64 KiB (ENHANCE_YOUR_CALM)`, async () => {
    const empty = await client();
    empty.send(
      headersFrame(1, grpcRequestFields('ServerLive'), { endHeaders: false }),
      ...Array.from({ length: MAX_HEADER_BLOCK_FRAMES + 1 }, () => frame(FrameType.CONTINUATION, 0, 1, Buffer.alloc(0))),
    );
    expect(await empty.goaway()).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    const large = await client();
    large.send(headersFrame(1, grpcRequestFields('ServerLive'), { endHeaders: false }), ...Array.from({ length: 5 }, () => frame(FrameType.CONTINUATION, 0, 1, Buffer.alloc(16_000, 0x40))));
    expect(await large.goaway()).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    await stillServes();
  });

  it(`keeps answers a client does not read in their streams past ${MAX_QUEUED_BYTES / 1024 ** 2} MiB queued, where the write timeout resets them`, async () => {
    const slow = await startRouter(['--routes', replicaRoute, '--grpc-framing', 'own', '--write-timeout-ms', '1000']);
    try {
      const c = await RawH2Client.open(Number((slow.grpcAddress ?? '').split(':')[1]), { paused: true });
      clients.push(c);
      // Every window wide open: only the router's own bound keeps 8 MiB of answers out of its socket.
      c.send(settingsFrame([[Setting.INITIAL_WINDOW_SIZE, MAX_WINDOW]]), windowUpdateFrame(0, MAX_WINDOW - 65_535));
      const message = framed(identityInfer(87_381));
      for (let id = 1; id <= 15; id += 2) c.send(headersFrame(id, grpcRequestFields('ModelInfer')), dataFrames(id, message, 16_384, true));
      await eventually(async () => expect((await slow.metrics()).get('modelmux_router_timeouts_total{phase="downstream_write"}') ?? 0).toBeGreaterThan(0), 20_000, 100);
    } finally {
      await slow.stop(2000);
    }
  });

  it('closes a connection that sends nothing after the preface’s timeout', async () => {
    const c = await client({ preface: false });
    await c.closes(15_000);
    expect(c.count(FrameType.SETTINGS)).toBe(1);
  });
});
