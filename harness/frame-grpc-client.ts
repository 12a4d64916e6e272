import { connect, type Socket } from 'node:net';
import { FrameReader, unpadded } from '../common/http2/frame-reader.js';
import { CLIENT_PREFACE, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Flag, type Frame, frameHeaderError, FrameType, MAX_WINDOW, Setting } from '../common/http2/frame-types.js';
import { dataFrames, headersFrames, pingFrame, SETTINGS_ACK, settingsFrame, windowUpdateFrame } from '../common/http2/frame-writer.js';
import { encodeHeaderBlock, HpackDecoder } from '../common/http2/hpack.js';
import { headersOf } from '../common/http2/header-fields.js';
import { StreamTable } from '../common/http2/stream-table.js';
import { type RawAnswer, rawAnswer } from './raw-grpc-client.js';

/**
 * A unary gRPC client in cleartext HTTP/2 on the project's own frame reader, frame writers and
 * HPACK coder (common/http2), for bench:grpc's closed loop. node:http2's client makes a native
 * stream with its own handles for every call; with eight such clients in one process at a few
 * thousand calls a second, its young-generation collections were several times longer than
 * undici's and stopped every client, and each pause landed in the gRPC tail the benchmark
 * measures (ADR 0055). This one keeps a call as a few JS objects, as undici keeps an HTTP/1.1
 * request. It follows the peer's SETTINGS (frame size, stream window), its flow control both
 * ways, PINGs, RST_STREAM and GOAWAY; it does not send what an attacker would —
 * harness/raw-grpc-client.ts does that.
 */

/** Our receive window per stream and, after the first WINDOW_UPDATE, for the connection: answers are never held back by it. */
const RECEIVE_WINDOW = MAX_WINDOW;
/** Received DATA bytes after which the connection's window is opened again by as many. */
const WINDOW_REFILL = 2 ** 30;

interface Call {
  readonly id: number;
  readonly t0: number;
  readonly chunks: Buffer[];
  /** Message bytes the peer's windows have not let out yet. */
  unsent: Buffer;
  sendWindow: number;
  resolve(answer: RawAnswer): void;
  reject(err: Error): void;
}

export class FrameGrpcConnection {
  /** The GOAWAY error code the server sent, if any; no call starts after it. */
  goawayCode: number | undefined;
  private readonly reader = new FrameReader(
    DEFAULT_MAX_FRAME_SIZE,
    (type, flags, streamId, length) => {
      const err = frameHeaderError(type, flags, streamId, length);
      if (err !== undefined) throw err;
    },
    false,
  );
  private readonly hpack = new HpackDecoder({ maxTableBytes: 4096, maxHeaderListBytes: 1 << 20, maxFields: 1000 });
  private readonly calls = new StreamTable<Call>();
  /** Each method's request header block: encoded without indexing, so one block serves every call. */
  private readonly blocks = new Map<string, Buffer>();
  private nextStreamId = 1;
  private peerMaxFrame = DEFAULT_MAX_FRAME_SIZE;
  private peerInitialWindow = DEFAULT_WINDOW;
  private connectionSendWindow = DEFAULT_WINDOW;
  private receivedSinceRefill = 0;
  /** A header block split over CONTINUATION frames, until its END_HEADERS. */
  private partialBlock: { streamId: number; endStream: boolean; parts: Buffer[] } | undefined;
  private failure: Error | undefined;

  private constructor(
    private readonly socket: Socket,
    private readonly authority: string,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      try {
        this.reader.push(chunk, (f) => this.onFrame(f));
      } catch (err) {
        this.fail(err instanceof Error ? err : new Error(String(err)));
      }
    });
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('the connection closed')));
    socket.write(
      Buffer.concat([
        CLIENT_PREFACE,
        settingsFrame([
          [Setting.ENABLE_PUSH, 0],
          [Setting.INITIAL_WINDOW_SIZE, RECEIVE_WINDOW],
        ]),
        windowUpdateFrame(0, RECEIVE_WINDOW - DEFAULT_WINDOW),
      ]),
    );
  }

  /** Connects to `address` (host:port); calls may start at once, before the server's SETTINGS (RFC 9113 §3.4). */
  static async open(address: string): Promise<FrameGrpcConnection> {
    const colon = address.lastIndexOf(':');
    const socket = connect({ host: address.slice(0, colon), port: Number(address.slice(colon + 1)) });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return new FrameGrpcConnection(socket, address);
  }

  /** Whether a call may start: the connection is open and the server has not said GOAWAY. */
  get usable(): boolean {
    return this.failure === undefined && this.goawayCode === undefined;
  }

  /** A unary call of `method` with `message` (framed, length prefix included): resolves when the stream ends, however it ends; rejects when the connection fails first. */
  call(method: string, message: Buffer): Promise<RawAnswer> {
    if (!this.usable) return Promise.reject(this.failure ?? new Error(`the server sent GOAWAY (${this.goawayCode ?? '?'})`));
    const streamId = this.nextStreamId;
    this.nextStreamId += 2;
    let block = this.blocks.get(method);
    if (block === undefined) {
      block = encodeHeaderBlock([
        ':method',
        'POST',
        ':scheme',
        'http',
        ':path',
        `/inference.GRPCInferenceService/${method}`,
        ':authority',
        this.authority,
        'content-type',
        'application/grpc',
        'te',
        'trailers',
      ]);
      this.blocks.set(method, block);
    }
    return new Promise<RawAnswer>((resolve, reject) => {
      const call: Call = { id: streamId, t0: performance.now(), chunks: [], unsent: message, sendWindow: this.peerInitialWindow, resolve, reject };
      this.calls.add(call);
      // HEADERS and DATA in one write, as gRPC clients send a small call: the server reads it whole.
      this.socket.cork();
      this.socket.write(headersFrames(streamId, block, this.peerMaxFrame, false));
      this.sendData(call);
      this.socket.uncork();
    });
  }

  close(): void {
    this.socket.destroy();
  }

  /** As much of the call's message as both windows let out; END_STREAM with its last byte. */
  private sendData(call: Call): void {
    // A window goes below zero when the peer's SETTINGS shrink it under what was already sent (RFC 9113 §6.9.2).
    const n = Math.max(0, Math.min(call.unsent.length, call.sendWindow, this.connectionSendWindow));
    if (n === 0 && call.unsent.length > 0) return;
    const last = n === call.unsent.length;
    this.socket.write(dataFrames(call.id, call.unsent.subarray(0, n), this.peerMaxFrame, last));
    call.sendWindow -= n;
    this.connectionSendWindow -= n;
    call.unsent = last ? Buffer.alloc(0) : call.unsent.subarray(n);
  }

  private flushBlocked(): void {
    for (const call of this.calls.values()) if (call.unsent.length > 0) this.sendData(call);
  }

  private onFrame(f: Frame): void {
    switch (f.type) {
      case FrameType.DATA:
        return this.onData(f);
      case FrameType.HEADERS: {
        const fragment = unpadded(f.payload, (f.flags & Flag.PADDED) !== 0, (f.flags & Flag.PRIORITY) !== 0 ? 5 : 0);
        if (fragment === undefined) throw new Error('a HEADERS frame whose padding does not fit');
        const endStream = (f.flags & Flag.END_STREAM) !== 0;
        if ((f.flags & Flag.END_HEADERS) !== 0) return this.onHeaderBlock(f.streamId, endStream, fragment);
        this.partialBlock = { streamId: f.streamId, endStream, parts: [fragment] };
        return;
      }
      case FrameType.CONTINUATION: {
        const partial = this.partialBlock;
        if (partial === undefined || partial.streamId !== f.streamId) throw new Error('a CONTINUATION frame outside a header block');
        partial.parts.push(f.payload);
        if ((f.flags & Flag.END_HEADERS) === 0) return;
        this.partialBlock = undefined;
        return this.onHeaderBlock(f.streamId, partial.endStream, Buffer.concat(partial.parts));
      }
      case FrameType.RST_STREAM:
        return this.end(f.streamId, [], f.payload.readUInt32BE(0));
      case FrameType.SETTINGS:
        if ((f.flags & Flag.ACK) === 0) this.onSettings(f.payload);
        return;
      case FrameType.PING:
        if ((f.flags & Flag.ACK) === 0) this.socket.write(pingFrame(f.payload, true));
        return;
      case FrameType.GOAWAY:
        return this.onGoaway(f.payload.readUInt32BE(0) & 0x7fffffff, f.payload.readUInt32BE(4));
      case FrameType.WINDOW_UPDATE: {
        const increment = f.payload.readUInt32BE(0) & 0x7fffffff;
        if (f.streamId === 0) this.connectionSendWindow += increment;
        else {
          const call = this.calls.get(f.streamId);
          if (call !== undefined) call.sendWindow += increment;
        }
        return this.flushBlocked();
      }
      default:
        // PRIORITY and unknown types carry nothing a client of unary calls needs (RFC 9113 §5.5).
        return;
    }
  }

  private onData(f: Frame): void {
    this.receivedSinceRefill += f.payload.length;
    if (this.receivedSinceRefill >= WINDOW_REFILL) {
      this.socket.write(windowUpdateFrame(0, this.receivedSinceRefill));
      this.receivedSinceRefill = 0;
    }
    const data = unpadded(f.payload, (f.flags & Flag.PADDED) !== 0);
    if (data === undefined) throw new Error('a DATA frame whose padding does not fit');
    this.calls.get(f.streamId)?.chunks.push(data);
    if ((f.flags & Flag.END_STREAM) !== 0) this.end(f.streamId, [], ErrorCode.NO_ERROR);
  }

  /** Every block is decoded, whosever it is: HPACK's dynamic table is the connection's. */
  private onHeaderBlock(streamId: number, endStream: boolean, block: Buffer): void {
    const { fields, tooLarge } = this.hpack.decode(block);
    if (tooLarge) throw new Error('a header block over 1 MiB');
    if (endStream) this.end(streamId, fields, ErrorCode.NO_ERROR);
  }

  private onSettings(payload: Buffer): void {
    for (let at = 0; at + 6 <= payload.length; at += 6) {
      const id = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      if (id === Setting.MAX_FRAME_SIZE) this.peerMaxFrame = value;
      if (id === Setting.INITIAL_WINDOW_SIZE) {
        for (const call of this.calls.values()) call.sendWindow += value - this.peerInitialWindow;
        this.peerInitialWindow = value;
      }
    }
    this.socket.write(SETTINGS_ACK);
    this.flushBlocked();
  }

  /** Calls the server did not take (above `lastStreamId`) fail; the others run to their end. */
  private onGoaway(lastStreamId: number, code: number): void {
    this.goawayCode = code;
    for (const call of this.calls.values()) {
      if (call.id <= lastStreamId) continue;
      this.calls.delete(call.id);
      call.reject(new Error(`the server sent GOAWAY (${code}) before taking the call`));
    }
  }

  /** The stream ended: `fields` are its trailers (or its only block), `rstCode` how it closed. */
  private end(streamId: number, fields: readonly string[], rstCode: number): void {
    const call = this.calls.get(streamId);
    if (call === undefined) return;
    this.calls.delete(streamId);
    const body = call.chunks.length === 1 ? (call.chunks[0] as Buffer) : Buffer.concat(call.chunks);
    call.resolve(rawAnswer(headersOf(fields), body, rstCode, call.t0));
  }

  private fail(err: Error): void {
    if (this.failure !== undefined) return;
    this.failure = err;
    this.socket.destroy();
    for (const call of this.calls.values()) {
      this.calls.delete(call.id);
      call.reject(err);
    }
  }
}
