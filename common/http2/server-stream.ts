import { EventEmitter } from 'node:events';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { CallStream } from '../grpc/call-stream.js';
import { ErrorCode } from './frame-types.js';
import { responseFields } from './header-fields.js';

/** What a stream asks of its connection (server-connection.ts). */
export interface StreamOwner {
  /** Writes a header block; END_STREAM with `endStream`. */
  sendHeaders(id: number, fields: readonly string[], endStream: boolean): void;
  /** Writes at most what the windows allow of `data` (all of it with END_STREAM, when it fits and `endStream`); returns the bytes sent. */
  sendData(stream: ServerStream, data: Buffer, endStream: boolean, cb: (() => void) | undefined): number;
  reset(id: number, code: number): void;
  /** The stream is closed both ways: it leaves the connection's table. */
  forget(stream: ServerStream): void;
}

/** A stream holds this much unsent answer before `write` says wait (node's writableHighWaterMark). */
const HIGH_WATER_BYTES = 16 * 1024;

interface Pending {
  data: Buffer;
  cb: (() => void) | undefined;
}

/**
 * One request stream of the router's own HTTP/2 server connection (ADR 0055), with what a unary
 * call uses of node:http2's ServerHttp2Stream (call-stream.ts): its request's DATA as `data`
 * events and its END_STREAM as `end`; an answer of HEADERS, DATA within the client's windows
 * (the rest waits for WINDOW_UPDATE) and trailers asked for by `wantTrailers`; `close` after
 * both sides ended or a reset either way. Every write of one turn goes out in one socket write
 * (the connection corks its socket for the turn).
 */
export class ServerStream extends EventEmitter implements CallStream {
  headersSent = false;
  writableEnded = false;
  destroyed = false;
  /** The client's END_STREAM came. */
  remoteEnded = false;
  /** Bytes this stream may still send (the client's window for it). */
  sendWindow: number;
  /** DATA payload bytes received, for the content-length check. */
  received = 0;
  /** Bytes received since the last WINDOW_UPDATE for this stream. */
  unacked = 0;
  private localEnded = false;
  private queue: Pending[] = [];
  private queued = 0;
  private endPending = false;
  private trailersWanted = false;
  /** Trailers given with the end (endWithTrailers): sent when wanted, with no `wantTrailers` listener. */
  private trailers: readonly string[] | undefined;
  private full = false;

  constructor(
    readonly id: number,
    private readonly owner: StreamOwner,
    sendWindow: number,
    /** The request's content-length, checked against its DATA. */
    readonly contentLength: number | undefined,
  ) {
    super();
    this.sendWindow = sendWindow;
  }

  get writableLength(): number {
    return this.queued;
  }

  respond(headers: OutgoingHttpHeaders, options?: { endStream?: boolean; waitForTrailers?: boolean }): void {
    this.respondFields(responseFields(headers), options);
  }

  respondFields(fields: readonly string[], options?: { endStream?: boolean; waitForTrailers?: boolean }): void {
    if (this.destroyed) return;
    if (this.headersSent) throw new Error('the stream has answered its headers already');
    this.headersSent = true;
    const end = options?.endStream === true;
    this.trailersWanted = options?.waitForTrailers === true;
    this.owner.sendHeaders(this.id, fields, end);
    if (end) {
      this.writableEnded = true;
      this.localEnd();
    }
  }

  write(chunk: Buffer, cb?: () => void): boolean {
    if (this.destroyed || this.writableEnded) return false;
    this.queue.push({ data: chunk, cb });
    this.queued += chunk.length;
    this.flush();
    this.full = this.queued > HIGH_WATER_BYTES;
    return !this.full;
  }

  end(chunk?: Buffer): void {
    if (this.destroyed || this.writableEnded) return;
    if (chunk !== undefined) this.write(chunk);
    this.writableEnded = true;
    this.endPending = true;
    this.flush();
  }

  endWithTrailers(fields: readonly string[]): void {
    if (this.destroyed || this.writableEnded) return;
    this.trailersWanted = true;
    this.trailers = fields;
    this.end();
  }

  sendTrailers(headers: OutgoingHttpHeaders): void {
    this.sendTrailerFields(responseFields(headers));
  }

  private sendTrailerFields(fields: readonly string[]): void {
    if (this.destroyed || this.localEnded) return;
    this.trailersWanted = false;
    this.owner.sendHeaders(this.id, fields, true);
    this.localEnd();
  }

  close(code: number = ErrorCode.NO_ERROR): void {
    if (this.destroyed) return;
    this.owner.reset(this.id, code);
    this.destroy();
  }

  /** Sends what the windows allow of the queue; at its end, the trailers or an empty END_STREAM. */
  flush(): void {
    while (this.queue.length > 0 && !this.destroyed) {
      const p = this.queue[0] as Pending;
      const last = this.queue.length === 1 && this.endPending && !this.trailersWanted;
      const sent = this.owner.sendData(this, p.data, last, p.cb);
      this.queued -= sent;
      if (sent < p.data.length) {
        p.data = p.data.subarray(sent);
        return;
      }
      this.queue.shift();
      if (last) return this.localEnd();
    }
    if (this.destroyed) return;
    if (this.full) {
      this.full = false;
      this.emit('drain');
    }
    if (!this.endPending || this.localEnded) return;
    this.endPending = false;
    if (this.trailers !== undefined) return this.sendTrailerFields(this.trailers);
    if (this.trailersWanted) return void this.emit('wantTrailers');
    this.owner.sendData(this, Buffer.alloc(0), true, undefined);
    this.localEnd();
  }

  /** DATA of the request. */
  receive(data: Buffer): void {
    if (data.length > 0) this.emit('data', data);
  }

  /** The client's END_STREAM. */
  remoteEnd(): void {
    this.remoteEnded = true;
    this.emit('end');
    if (this.localEnded) this.destroy();
  }

  /** Closed without a reset of ours: the client's RST_STREAM, or the connection's end. */
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.queue = [];
    this.owner.forget(this);
    process.nextTick(() => this.emit('close'));
    return this;
  }

  private localEnd(): void {
    this.localEnded = true;
    if (this.remoteEnded) this.destroy();
  }
}
