import { connect, type Socket } from 'node:net';
import { eventually } from '../../harness/eventually.js';
import { CLIENT_PREFACE, Flag, FrameType } from '../../common/http2/frame-types.js';
import { frame, headersFrames, settingsFrame } from '../../common/http2/frame-writer.js';
import { encodeHeaderBlock } from '../../common/http2/hpack.js';

/** A frame the server sent, as a test reads it. */
export interface SeenFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** A gRPC request's header fields for `method` of the inference service, with `extra` fields after them. */
export function grpcRequestFields(method: string, extra: string[] = []): string[] {
  return [':method', 'POST', ':scheme', 'http', ':path', `/inference.GRPCInferenceService/${method}`, ':authority', 'router', 'content-type', 'application/grpc', 'te', 'trailers', ...extra];
}

/** HEADERS of a request on `streamId` (and CONTINUATIONs past 16 KiB; END_STREAM with `end`), its block literal without indexing; `endHeaders: false` leaves the block open. */
export function headersFrame(streamId: number, fields: readonly string[], o: { end?: boolean; endHeaders?: boolean } = {}): Buffer {
  if (o.endHeaders !== false) return headersFrames(streamId, encodeHeaderBlock(fields), 16_384, o.end === true);
  return frame(FrameType.HEADERS, o.end === true ? Flag.END_STREAM : 0, streamId, encodeHeaderBlock(fields));
}

export function dataFrame(streamId: number, data: Buffer, end = false): Buffer {
  return frame(FrameType.DATA, end ? Flag.END_STREAM : 0, streamId, data);
}

/**
 * A client that writes HTTP/2 frames byte for byte, as no library would send them, to the
 * router's gRPC port, and reads the frames it gets back: the hostile tests' client for the
 * router's own framing (ADR 0055).
 */
export class RawH2Client {
  readonly frames: SeenFrame[] = [];
  closed = false;
  private held = Buffer.alloc(0);

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => (this.closed = true));
  }

  /** Connects; unless `preface` is false, sends the client preface and an empty SETTINGS. `paused`: the client reads nothing. */
  static async open(port: number, o: { preface?: boolean; paused?: boolean } = {}): Promise<RawH2Client> {
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const c = new RawH2Client(socket);
    if (o.paused === true) socket.pause();
    if (o.preface !== false) c.send(CLIENT_PREFACE, settingsFrame([]));
    return c;
  }

  send(...bytes: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(bytes));
  }

  get localPort(): number {
    return this.socket.localPort ?? 0;
  }

  /** The GOAWAY's error code, once one came. */
  async goaway(timeoutMs = 5000): Promise<number> {
    return eventually(
      () => {
        const f = this.frames.find((x) => x.type === FrameType.GOAWAY);
        if (f === undefined) throw new Error(`no GOAWAY yet (frames: ${this.frames.map((x) => x.type).join(',')})`);
        return f.payload.readUInt32BE(4);
      },
      timeoutMs,
      20,
    );
  }

  /** The RST_STREAM code of `streamId`, once one came. */
  async reset(streamId: number, timeoutMs = 5000): Promise<number> {
    return eventually(
      () => {
        const f = this.frames.find((x) => x.type === FrameType.RST_STREAM && x.streamId === streamId);
        if (f === undefined) throw new Error(`no RST_STREAM on ${streamId} yet`);
        return f.payload.readUInt32BE(0);
      },
      timeoutMs,
      20,
    );
  }

  /** Waits for the server's END_STREAM (or RST_STREAM) on `streamId`. */
  async closesStream(streamId: number, timeoutMs = 5000): Promise<void> {
    await eventually(
      () => {
        if (
          !this.frames.some((f) => f.streamId === streamId && (f.type === FrameType.RST_STREAM || ((f.type === FrameType.DATA || f.type === FrameType.HEADERS) && (f.flags & Flag.END_STREAM) !== 0)))
        ) {
          throw new Error(`stream ${streamId} is still open`);
        }
      },
      timeoutMs,
      20,
    );
  }

  /** Waits until `n` frames of `type` came. */
  async has(type: number, n: number, timeoutMs = 5000): Promise<void> {
    await eventually(
      () => {
        if (this.count(type) < n) throw new Error(`${this.count(type)} frames of type ${type}, not ${n}`);
      },
      timeoutMs,
      20,
    );
  }

  async closes(timeoutMs = 5000): Promise<void> {
    await eventually(
      () => {
        if (!this.closed) throw new Error('the connection is still open');
      },
      timeoutMs,
      20,
    );
  }

  /** Frames of `type` received so far. */
  count(type: number): number {
    return this.frames.filter((f) => f.type === type).length;
  }

  /** A paused client starts reading. */
  resume(): void {
    this.socket.resume();
  }

  close(): void {
    this.socket.destroy();
  }

  private read(chunk: Buffer): void {
    let buf = Buffer.concat([this.held, chunk]);
    while (buf.length >= 9) {
      const length = buf.readUIntBE(0, 3);
      if (buf.length < 9 + length) break;
      this.frames.push({ type: buf[3] as number, flags: buf[4] as number, streamId: buf.readUInt32BE(5) & 0x7fffffff, payload: Buffer.from(buf.subarray(9, 9 + length)) });
      buf = buf.subarray(9 + length);
    }
    this.held = buf;
  }
}

/** The raw clients a test file opens on one port, closed together after each test. */
export class RawH2Clients {
  private readonly opened: RawH2Client[] = [];

  constructor(private readonly port: () => number) {}

  async open(o: Parameters<typeof RawH2Client.open>[1] = {}): Promise<RawH2Client> {
    const c = await RawH2Client.open(this.port(), o);
    this.opened.push(c);
    return c;
  }

  closeAll(): void {
    for (const c of this.opened.splice(0)) c.close();
  }
}
