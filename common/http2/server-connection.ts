import type { IncomingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import type { CallSession } from '../grpc/call-stream.js';
import { FrameReader, unpadded } from './frame-reader.js';
import { ConnectionError, DEFAULT_MAX_FRAME_SIZE, frameHeaderError, DEFAULT_WINDOW, ErrorCode, Flag, FrameType, MAX_WINDOW, Setting, type Frame } from './frame-types.js';
import { dataFrames, goawayFrame, headersFrames, pingFrame, rstStreamFrame, SETTINGS_ACK, settingsFrame, windowUpdateFrame } from './frame-writer.js';
import { requestHeaders, trailersError } from './header-fields.js';
import { encodeHeaderBlock, HpackDecoder, HpackError } from './hpack.js';
import { ServerStream, type StreamOwner } from './server-stream.js';
import { StreamTable } from './stream-table.js';

/** Every bound of one connection of the router's own HTTP/2 server (docs/limits.md). */
export interface ServerConnectionLimits {
  /** SETTINGS_MAX_CONCURRENT_STREAMS: a stream past it is refused (RST_STREAM REFUSED_STREAM). */
  maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE: a request head past it is refused. */
  maxHeaderListBytes: number;
  /** A request's largest message: the windows the client gets let a message this large go in one round trip. */
  maxMessageBytes: number;
}

/** A header block (HEADERS and its CONTINUATIONs) of more bytes or frames than this ends the connection (CVE-2024-27316). */
export const MAX_HEADER_BLOCK_BYTES = 64 * 1024;
export const MAX_HEADER_BLOCK_FRAMES = 32;
/** Header fields of one request, as node:http2's maxHeaderListPairs. */
const MAX_HEADER_FIELDS = 128;
/** Frames that carry no work (empty DATA, PRIORITY, unknown types, DATA on a closed stream, refused streams) a connection may send within JUNK_WINDOW_MS. */
export const MAX_JUNK_FRAMES = 1000;
const JUNK_WINDOW_MS = 10_000;
/** Control frames owed (SETTINGS and PING ACKs, RST_STREAMs) queued before the socket took the earlier ones, as nghttp2's outbound queue bound. */
export const MAX_OWED_CONTROL_FRAMES = 1000;
/** Answer bytes a connection hands its socket beyond what the client has taken; the rest waits in its streams. */
export const MAX_QUEUED_BYTES = 1024 * 1024;
/** Entries of one SETTINGS frame, as nghttp2's max_settings: each INITIAL_WINDOW_SIZE walks every stream (CVE-2020-11080). */
export const MAX_SETTINGS_ENTRIES = 32;
/** DATA on a stream this side reset is work for nothing below this size; a message's full frames are a client's in flight. */
const SMALL_FRAME_BYTES = 1024;
/** The client preface and SETTINGS must come within this of the connection. */
export const PREFACE_TIMEOUT_MS = 10_000;
/** A connection closed on an error gets this long to flush its GOAWAY before it is cut. */
const CLOSE_LINGER_MS = 1000;
const PING_PAYLOAD = Buffer.from('mmuxping', 'latin1');
/** SETTINGS_HEADER_TABLE_SIZE's initial value (RFC 9113 §6.5.2). */
const DEFAULT_HEADER_TABLE_BYTES = 4096;
/** An HPACK dynamic table size update to 0 (RFC 7541 §6.3). */
const TABLE_SIZE_ZERO = Buffer.from([0x20]);
/** Frames of one turn up to this many bytes are copied into one buffer for one write; more go as a writev. */
const ONE_WRITE_BYTES = 64 * 1024;

export interface ServerConnectionEvents {
  /** A request stream opened with its headers: handlers attach before its DATA. */
  stream(stream: ServerStream, headers: IncomingHttpHeaders): void;
  /** The socket closed. */
  close(): void;
}

interface Continuing {
  streamId: number;
  flags: number;
  parts: Buffer[];
  bytes: number;
}

/**
 * One client connection of the router's own HTTP/2 server for gRPC (h2c with prior knowledge,
 * ADR 0055): frames read from the socket's bytes (frame-reader.ts), header blocks decoded by
 * hpack.ts, flow control both ways, and each answer's frames of one turn written as one socket
 * write. What nghttp2 bounded is bounded here per connection: header blocks (bytes and frames),
 * frames that carry no work, control frames owed to a client that does not read, streams past
 * SETTINGS_MAX_CONCURRENT_STREAMS, the preface's time. Any connection error is a GOAWAY with
 * its code and the connection's end; a stream error is that stream's RST_STREAM.
 */
export class ServerConnection implements CallSession, StreamOwner {
  closed = false;
  destroyed = false;
  private readonly reader = new FrameReader(DEFAULT_MAX_FRAME_SIZE, (type, flags, streamId, length) => this.checkHeader(type, flags, streamId, length));
  private readonly decoder: HpackDecoder;
  private readonly streams = new StreamTable<ServerStream>();
  private readonly streamWindow: number;
  private lastStreamId = 0;
  private settled = false;
  private peerMaxFrame = DEFAULT_MAX_FRAME_SIZE;
  private peerInitialWindow = DEFAULT_WINDOW;
  private sendWindow = DEFAULT_WINDOW;
  /** Bytes received since the last connection WINDOW_UPDATE. */
  private unacked = 0;
  private continuing: Continuing | undefined;
  private junk = 0;
  private junkSince = 0;
  private owed = 0;
  /** Frames written this turn, their bytes, and what waits on them (write). */
  private out: Buffer[] = [];
  private outBytes = 0;
  private outCallbacks: (() => void)[] = [];
  private goawaySent = false;
  /** A connection error was sent: nothing more is read. */
  private broken = false;
  private ended = false;
  /** Streams this side reset, whose frames in flight are ignored (RFC 9113 §5.1), the latest first out. */
  private readonly resetIds = new Set<number>();
  private pingCb: ((err: Error | null) => void) | undefined;
  /** The dynamic table size the client's decoder holds ours to: 4096 until a size update of 0 tells it ours is unused. */
  private encoderTableBytes = DEFAULT_HEADER_TABLE_BYTES;
  /** The client's SETTINGS_HEADER_TABLE_SIZE went below it: our next header block must open with a size update (RFC 7541 §4.2). */
  private tableSizeOwed = false;
  private readonly prefaceTimer: NodeJS.Timeout;
  /** A socket chunk's frames are being handled; what waits for their end and their events (afterRead). */
  private reading = false;
  private readonly afterReads: (() => void)[] = [];

  constructor(
    readonly socket: Socket,
    private readonly limits: ServerConnectionLimits,
    private readonly events: ServerConnectionEvents,
  ) {
    this.decoder = new HpackDecoder({ maxTableBytes: 4096, maxHeaderListBytes: limits.maxHeaderListBytes, maxFields: MAX_HEADER_FIELDS });
    // Large enough that a message up to --max-body-bytes is not throttled per round trip: the
    // byte budget, which counts each call's bytes as they come, bounds what is held.
    this.streamWindow = Math.min(MAX_WINDOW, Math.max(DEFAULT_WINDOW, limits.maxMessageBytes + 1024));
    this.junkSince = Date.now();
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => undefined);
    socket.on('drain', () => this.flushStreams());
    socket.once('close', () => this.onClose());
    this.write(
      settingsFrame([
        [Setting.MAX_CONCURRENT_STREAMS, limits.maxConcurrentStreams],
        [Setting.ENABLE_PUSH, 0],
        [Setting.INITIAL_WINDOW_SIZE, this.streamWindow],
        [Setting.MAX_HEADER_LIST_SIZE, limits.maxHeaderListBytes],
      ]),
    );
    this.write(windowUpdateFrame(0, MAX_WINDOW - DEFAULT_WINDOW));
    this.prefaceTimer = setTimeout(() => this.settled || this.destroy(), PREFACE_TIMEOUT_MS);
    this.prefaceTimer.unref();
  }

  close(): void {
    if (this.closed || this.destroyed) return;
    this.closed = true;
    this.goaway(ErrorCode.NO_ERROR);
    if (this.streams.size === 0) this.end();
  }

  goaway(code: number): void {
    if (this.destroyed) return;
    this.goawaySent = true;
    this.write(goawayFrame(this.lastStreamId, code));
  }

  destroy(): void {
    if (this.destroyed) return;
    this.socket.destroy();
    this.onClose();
  }

  ping(cb: (err: Error | null) => void): boolean {
    if (this.destroyed || this.pingCb !== undefined) return false;
    this.pingCb = cb;
    this.write(pingFrame(PING_PAYLOAD, false));
    return true;
  }

  // --- what streams ask ----------------------------------------------------------------------

  sendHeaders(id: number, fields: readonly string[], endStream: boolean): void {
    let block = encodeHeaderBlock(fields);
    if (this.tableSizeOwed) {
      // Our encoder adds no entries: one update to 0 satisfies any size the client sets later.
      block = Buffer.concat([TABLE_SIZE_ZERO, block]);
      this.tableSizeOwed = false;
      this.encoderTableBytes = 0;
    }
    this.write(headersFrames(id, block, this.peerMaxFrame, endStream));
  }

  sendData(stream: ServerStream, data: Buffer, endStream: boolean, cb: (() => void) | undefined): number {
    // The socket's own queue is a window too: a client that does not read, whatever windows it
    // grants, leaves answers in their streams (in the byte budget, under the write timeout), not
    // in the socket's memory.
    const room = MAX_QUEUED_BYTES - this.socket.writableLength - this.outBytes;
    // Windows made negative by SETTINGS_INITIAL_WINDOW_SIZE send nothing, an empty END_STREAM included.
    const n = Math.max(0, Math.min(data.length, stream.sendWindow, this.sendWindow, room));
    if (n === 0 && data.length > 0) return 0;
    stream.sendWindow -= n;
    this.sendWindow -= n;
    const whole = n === data.length;
    this.write(dataFrames(stream.id, whole ? data : data.subarray(0, n), this.peerMaxFrame, endStream && whole), whole ? cb : undefined);
    return n;
  }

  reset(id: number, code: number): void {
    this.resetIds.add(id);
    if (this.resetIds.size > 2 * this.limits.maxConcurrentStreams) this.resetIds.delete(this.resetIds.values().next().value as number);
    this.owe(rstStreamFrame(id, code));
  }

  forget(stream: ServerStream): void {
    this.streams.delete(stream.id);
    if (this.streams.size === 0 && this.closed) this.end();
  }

  // --- reading ----------------------------------------------------------------------------------

  private onData(chunk: Buffer): void {
    if (this.destroyed || this.broken) return;
    this.reading = true;
    try {
      this.reader.push(chunk, this.onFrame);
    } catch (err) {
      // A handler's throw is the connection's end, never the process's.
      this.fail(err instanceof ConnectionError ? err.code : ErrorCode.INTERNAL_ERROR);
    } finally {
      this.reading = false;
    }
    // Once every frame of the chunk has been handled and the events they queued have run (a
    // reset's stream 'close' among them): a tick, not a turn of the event loop.
    if (this.afterReads.length > 0) process.nextTick(this.runAfterReads);
  }

  private readonly runAfterReads = (): void => {
    for (const fn of this.afterReads.splice(0)) fn();
  };

  afterRead(fn: () => void): void {
    if (this.reading) this.afterReads.push(fn);
    else setImmediate(fn);
  }

  /** What a frame's header makes a connection error, with the connection's state, found before its payload is awaited (as nghttp2 finds it). */
  private checkHeader(type: number, flags: number, streamId: number, length: number): void {
    const err = frameHeaderError(type, flags, streamId, length);
    if (err !== undefined) throw err;
    if (type === FrameType.SETTINGS && length > 6 * MAX_SETTINGS_ENTRIES) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'a SETTINGS of too many entries');
    if (!this.settled && type !== FrameType.SETTINGS) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'the client preface is not followed by SETTINGS');
    if (this.continuing !== undefined && (type !== FrameType.CONTINUATION || streamId !== this.continuing.streamId))
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a frame inside a header block');
    if (type === FrameType.DATA && streamId > this.lastStreamId) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on an idle stream');
    if (type === FrameType.CONTINUATION && this.continuing === undefined) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'CONTINUATION without its HEADERS');
    if (type !== FrameType.HEADERS || this.streams.has(streamId) || this.resetIds.has(streamId)) return;
    if (streamId % 2 === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a client stream with an even id');
    if (streamId <= this.lastStreamId) throw new ConnectionError(ErrorCode.STREAM_CLOSED, 'HEADERS on a closed stream');
  }

  private readonly onFrame = (f: Frame): void => {
    if (this.destroyed || this.broken) return;
    switch (f.type) {
      case FrameType.DATA:
        return this.onDataFrame(f);
      case FrameType.HEADERS:
        return this.onHeaders(f);
      case FrameType.PRIORITY:
        this.junkFrame();
        if (f.payload.length !== 5) this.streamError(f.streamId, ErrorCode.FRAME_SIZE_ERROR);
        return;
      case FrameType.RST_STREAM:
        return this.onReset(f);
      case FrameType.SETTINGS:
        return this.onSettings(f);
      case FrameType.PING:
        return this.onPing(f);
      case FrameType.GOAWAY:
        this.closed = true;
        if (this.streams.size === 0) this.end();
        return;
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdate(f);
      case FrameType.CONTINUATION:
        return this.onContinuation(f);
      default:
        // Unknown types are ignored (RFC 9113 §5.5), and count as frames without work.
        return this.junkFrame();
    }
  };

  private onDataFrame(f: Frame): void {
    const data = unpadded(f.payload, (f.flags & Flag.PADDED) !== 0);
    if (data === undefined) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA padding longer than its frame');
    this.consumed(f.payload.length);
    const s = this.streams.get(f.streamId);
    if (s === undefined && this.resetIds.has(f.streamId)) {
      // A message in flight when this side reset its stream is a legitimate client's, in full frames: small ones count.
      if (f.payload.length < SMALL_FRAME_BYTES) this.junkFrame();
      return;
    }
    if (s === undefined || s.remoteEnded) {
      this.junkFrame();
      if (s !== undefined) s.close(ErrorCode.STREAM_CLOSED);
      return this.reset(f.streamId, ErrorCode.STREAM_CLOSED);
    }
    const end = (f.flags & Flag.END_STREAM) !== 0;
    if (data.length === 0 && !end) this.junkFrame();
    s.unacked += f.payload.length;
    if (s.unacked > this.streamWindow) return s.close(ErrorCode.FLOW_CONTROL_ERROR);
    s.received += data.length;
    if (s.contentLength !== undefined && (s.received > s.contentLength || (end && s.received !== s.contentLength))) return s.close(ErrorCode.PROTOCOL_ERROR);
    if (!end && s.unacked >= this.streamWindow / 2) {
      this.write(windowUpdateFrame(s.id, s.unacked));
      s.unacked = 0;
    }
    s.receive(data);
    if (end && !s.destroyed) s.remoteEnd();
  }

  /** Bytes of DATA received, whatever becomes of them: the connection's window is given back as they come. */
  private consumed(n: number): void {
    this.unacked += n;
    // The client has a window of MAX_WINDOW less what it sent since the last WINDOW_UPDATE.
    if (this.unacked > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "DATA past the connection's window");
    if (this.unacked < MAX_WINDOW / 2) return;
    this.write(windowUpdateFrame(0, this.unacked));
    this.unacked = 0;
  }

  private onHeaders(f: Frame): void {
    const priority = (f.flags & Flag.PRIORITY) !== 0;
    const fragment = unpadded(f.payload, (f.flags & Flag.PADDED) !== 0, priority ? 5 : 0);
    if (fragment === undefined) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS padding longer than its frame');
    if (priority) {
      const dependency = f.payload.readUInt32BE((f.flags & Flag.PADDED) !== 0 ? 1 : 0) & 0x7fffffff;
      if (dependency === f.streamId) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a stream that depends on itself');
    }
    if ((f.flags & Flag.END_HEADERS) !== 0) return this.headerBlock(f.streamId, f.flags, fragment);
    this.continuing = { streamId: f.streamId, flags: f.flags, parts: [fragment], bytes: fragment.length };
  }

  private onContinuation(f: Frame): void {
    // checkHeader saw to it that this continues the open block.
    const c = this.continuing as Continuing;
    c.parts.push(f.payload);
    c.bytes += f.payload.length;
    if (c.bytes > MAX_HEADER_BLOCK_BYTES || c.parts.length > MAX_HEADER_BLOCK_FRAMES) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'a header block of too many bytes or frames');
    if ((f.flags & Flag.END_HEADERS) === 0) return;
    this.continuing = undefined;
    this.headerBlock(c.streamId, c.flags, Buffer.concat(c.parts, c.bytes));
  }

  private headerBlock(id: number, flags: number, block: Buffer): void {
    let decoded: { fields: string[]; tooLarge: boolean };
    try {
      // Decoded whatever becomes of the stream: the dynamic table is the connection's.
      decoded = this.decoder.decode(block);
    } catch (err) {
      if (err instanceof HpackError) throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, err.message);
      throw err;
    }
    const end = (flags & Flag.END_STREAM) !== 0;
    const open = this.streams.get(id);
    if (open !== undefined) return this.trailers(open, end, decoded.fields);
    if (this.resetIds.has(id)) return this.junkFrame();
    this.lastStreamId = id;
    if (this.goawaySent || this.closed) return this.refuse(id, ErrorCode.REFUSED_STREAM);
    if (decoded.tooLarge) return this.refuse(id, ErrorCode.ENHANCE_YOUR_CALM);
    const headers = requestHeaders(decoded.fields);
    if (typeof headers === 'string') return this.refuse(id, ErrorCode.PROTOCOL_ERROR);
    if (this.streams.size >= this.limits.maxConcurrentStreams) return this.refuse(id, ErrorCode.REFUSED_STREAM);
    const length = headers['content-length'];
    const s = new ServerStream(id, this, this.peerInitialWindow, length === undefined ? undefined : Number(length));
    this.streams.add(s);
    this.events.stream(s, headers);
    if (!end || s.destroyed) return;
    if (s.contentLength !== undefined && s.contentLength !== 0) return s.close(ErrorCode.PROTOCOL_ERROR);
    s.remoteEnd();
  }

  /** A second header block on an open stream: the request's trailers, which end it; their fields are checked, not kept. */
  private trailers(s: ServerStream, end: boolean, fields: readonly string[]): void {
    if (s.remoteEnded) return s.close(ErrorCode.STREAM_CLOSED);
    if (!end || trailersError(fields) !== undefined) return s.close(ErrorCode.PROTOCOL_ERROR);
    if (s.contentLength !== undefined && s.received !== s.contentLength) return s.close(ErrorCode.PROTOCOL_ERROR);
    s.remoteEnd();
  }

  private refuse(id: number, code: number): void {
    this.junkFrame();
    this.reset(id, code);
  }

  private onReset(f: Frame): void {
    if (f.streamId > this.lastStreamId) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
    const s = this.streams.get(f.streamId);
    // A reset of an open call is the reset budget's (unary-server.ts); of a closed stream, work for nothing.
    if (s === undefined) return this.junkFrame();
    s.destroy();
  }

  private onSettings(f: Frame): void {
    // Our one SETTINGS is owed one ACK: a stream of them is work for nothing.
    if ((f.flags & Flag.ACK) !== 0) return this.junkFrame();
    for (let at = 0; at < f.payload.length; at += 6) this.setting(f.payload.readUInt16BE(at), f.payload.readUInt32BE(at + 2));
    if (!this.settled) {
      this.settled = true;
      clearTimeout(this.prefaceTimer);
    }
    this.owe(SETTINGS_ACK);
  }

  private setting(id: number, value: number): void {
    if (id === Setting.HEADER_TABLE_SIZE && value < this.encoderTableBytes) this.tableSizeOwed = true;
    if (id === Setting.ENABLE_PUSH && value > 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS_ENABLE_PUSH other than 0 or 1');
    if (id === Setting.MAX_FRAME_SIZE) {
      if (value < DEFAULT_MAX_FRAME_SIZE || value > 16_777_215) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS_MAX_FRAME_SIZE out of range');
      this.peerMaxFrame = value;
    }
    if (id !== Setting.INITIAL_WINDOW_SIZE) return;
    if (value > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1');
    const delta = value - this.peerInitialWindow;
    this.peerInitialWindow = value;
    for (const s of this.streams.values()) {
      s.sendWindow += delta;
      if (s.sendWindow > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "a stream's window over 2^31-1");
    }
    if (delta > 0) this.flushStreams();
  }

  private onPing(f: Frame): void {
    if ((f.flags & Flag.ACK) === 0) return this.owe(pingFrame(f.payload, true));
    if (this.pingCb === undefined) return this.junkFrame();
    const cb = this.pingCb;
    this.pingCb = undefined;
    cb?.(null);
  }

  private onWindowUpdate(f: Frame): void {
    const increment = f.payload.readUInt32BE(0) & 0x7fffffff;
    if (f.streamId === 0) {
      if (increment === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0');
      this.sendWindow += increment;
      if (this.sendWindow > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "the connection's window over 2^31-1");
      return this.flushStreams();
    }
    if (f.streamId > this.lastStreamId) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
    const s = this.streams.get(f.streamId);
    // Not junk: a client that read an answer's last bytes after its END_STREAM opens its window late.
    if (s === undefined) return;
    if (increment === 0) return s.close(ErrorCode.PROTOCOL_ERROR);
    s.sendWindow += increment;
    if (s.sendWindow > MAX_WINDOW) return s.close(ErrorCode.FLOW_CONTROL_ERROR);
    s.flush();
  }

  private flushStreams(): void {
    for (const s of this.streams.values()) {
      if (this.sendWindow <= 0) return;
      s.flush();
    }
  }

  private streamError(id: number, code: number): void {
    const s = this.streams.get(id);
    if (s !== undefined) s.close(code);
    else this.reset(id, code);
  }

  /** A frame that carries no work: past MAX_JUNK_FRAMES within the window, the connection is a flood. */
  private junkFrame(): void {
    const now = Date.now();
    if (now - this.junkSince >= JUNK_WINDOW_MS) {
      this.junkSince = now;
      this.junk = 0;
    }
    if (++this.junk > MAX_JUNK_FRAMES) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too many frames without work');
  }

  // --- writing ---------------------------------------------------------------------------------

  /** A control frame the client is owed: past MAX_OWED_CONTROL_FRAMES queued behind a socket it does not read, the connection is a flood. */
  private owe(frame: Buffer): void {
    if (++this.owed > MAX_OWED_CONTROL_FRAMES) return this.fail(ErrorCode.ENHANCE_YOUR_CALM);
    this.write(frame);
  }

  /**
   * Frames written in one turn go out in one socket write at its end, copied into one buffer while
   * they are small (a relayed answer's HEADERS, DATA and trailers: one plain write, cheaper than a
   * corked writev); `cb` runs once the socket has taken them.
   */
  private write(bytes: Buffer, cb?: () => void): void {
    if (this.destroyed) return;
    this.out.push(bytes);
    this.outBytes += bytes.length;
    if (cb !== undefined) this.outCallbacks.push(cb);
    if (this.out.length > 1) return;
    process.nextTick(this.flushOut);
  }

  private readonly flushOut = (): void => {
    const out = this.out;
    if (out.length === 0 || this.destroyed) return;
    const callbacks = this.outCallbacks;
    const bytes = this.outBytes;
    this.out = [];
    this.outBytes = 0;
    this.outCallbacks = [];
    const done = callbacks.length === 0 ? undefined : (): void => callbacks.forEach((f) => f());
    if (out.length === 1 || bytes <= ONE_WRITE_BYTES) {
      this.socket.write(out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out, bytes), done);
    } else {
      this.socket.cork();
      out.forEach((b, i) => this.socket.write(b, i === out.length - 1 ? done : undefined));
      this.socket.uncork();
    }
    if (this.socket.writableLength === 0) this.owed = 0;
  };

  /** A connection error: GOAWAY with its code, then the connection's end. */
  private fail(code: number): void {
    if (this.broken) return;
    this.broken = true;
    this.goaway(code);
    this.end();
  }

  private end(): void {
    if (this.destroyed) return;
    this.flushOut();
    this.socket.end();
    setTimeout(() => this.destroy(), CLOSE_LINGER_MS).unref();
  }

  private onClose(): void {
    if (this.ended) return;
    this.ended = true;
    this.destroyed = true;
    this.closed = true;
    clearTimeout(this.prefaceTimer);
    for (const s of this.streams.values()) s.destroy();
    const cb = this.pingCb;
    this.pingCb = undefined;
    cb?.(new Error('the connection closed'));
    this.events.close();
  }
}
