import { STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { clientErrorResponse } from './client-error.js';
import { takeConnectionListener, type ConnectionListener } from './connection-listener.js';
import type { DownstreamRequest, DownstreamResponse } from './downstream.js';
import { scanRequestHead, type RequestHead } from './http1-request.js';
import { fieldValue } from './http1-syntax.js';
import type { TimeoutPhase } from '../metrics.js';
import { endWithAnswer } from './socket-end.js';
import { writeHeadAndBody } from './socket-write.js';
import { releaseRead } from '../../common/read-release.js';

export interface FastPathOptions {
  /** Largest request head read here; a larger one goes to node:http (which answers 431). */
  maxHeadBytes: number;
  /** An idle keep-alive connection is closed after this long. */
  keepAliveTimeoutMs: number;
  /** A request head must be complete this long after its first byte, else 408 `request_timeout`. */
  headersTimeoutMs: number;
  /**
   * A body the handler left unread when it answered is read and dropped while its bytes keep
   * coming within these bounds (no byte for this long; all of it since its head; both default to
   * `headersTimeoutMs`), then the connection closes. While the handler reads a body it times the
   * body out itself.
   */
  bodyIdleTimeoutMs?: number;
  bodyTimeoutMs?: number;
  /** How often connections are checked against these timeouts (default 1000). */
  sweepMs?: number;
  /** Told of every connection a timeout ends. */
  onTimeout?: (phase: TimeoutPhase) => void;
}

type Handler = (req: DownstreamRequest, res: DownstreamResponse) => void;

/**
 * The router's hot path for plain HTTP/1.1 (ADR 0019). It takes every connection of `server`
 * before node:http sees it, reads request heads with `scanRequestHead`, hands each request to
 * the same handler as node:http would, and writes responses straight to the socket: no
 * IncomingMessage, ServerResponse or stream machinery per request. At the first request head
 * outside its subset (chunked or HTTP/1.0 bodies, Expect, Upgrade, anything malformed) the
 * connection, with the bytes read so far, goes to node:http for good, by the documented route of
 * the server's `connection` event. Connections are read through their `data` events.
 */
export class FastPath {
  private readonly connections = new Set<ClientConnection>();
  private readonly nodeListener: ConnectionListener;
  private readonly sweep: NodeJS.Timeout;
  draining = false;
  /** The `keep-alive: timeout=<s>` field of an answer that keeps its connection, in whole seconds as node:http writes it. */
  readonly keepAliveField: string;

  constructor(
    readonly server: Server,
    readonly handle: Handler,
    readonly options: FastPathOptions,
  ) {
    this.nodeListener = takeConnectionListener(server);
    this.keepAliveField = `keep-alive: timeout=${Math.floor(options.keepAliveTimeoutMs / 1000)}\r\n`;
    server.on('connection', (socket: Socket) => this.connections.add(new ClientConnection(this, socket)));
    this.sweep = setInterval(() => this.expire(Date.now()), options.sweepMs ?? 1000);
    this.sweep.unref();
  }

  /** Connections served here now. */
  get size(): number {
    return this.connections.size;
  }

  /** Responses from now on close their connection; idle connections close at once. */
  drain(): void {
    this.draining = true;
    this.closeIdle();
  }

  closeIdle(): void {
    for (const c of this.connections) if (c.idle) c.socket.destroy();
  }

  closeAll(): void {
    clearInterval(this.sweep);
    for (const c of this.connections) c.socket.destroy();
  }

  forget(c: ClientConnection): void {
    this.connections.delete(c);
  }

  handOff(c: ClientConnection): void {
    this.connections.delete(c);
    this.nodeListener.call(this.server, c.socket);
  }

  private expire(now: number): void {
    for (const c of this.connections) {
      const phase = c.expire(now, this.options);
      if (phase !== undefined) this.options.onTimeout?.(phase);
    }
  }
}

/** One client connection while the fast path serves it: one request at a time, in order. */
class ClientConnection {
  /** Bytes read and not yet consumed: a partial head, body bytes, or pipelined requests. */
  private buf: Buffer | null = null;
  private req: FastRequest | undefined;
  private res: FastResponse | undefined;
  private bodyLeft = 0;
  private pumping = false;
  /** The connection is closing after a response: what the client still sends is not read. */
  private closing = false;
  /** The next request waits until the client has taken the answers written to it. */
  private awaitingDrain = false;
  /** When the connection last became idle, or when the pending head's first byte came. */
  private since = Date.now();
  /** When the request under way had its head read, and when its connection last read a byte. */
  private headAt = 0;
  private readAt = 0;

  constructor(
    private readonly path: FastPath,
    readonly socket: Socket,
  ) {
    socket.setNoDelay(true);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
  }

  /** No request under way and none begun, and the client has taken every answer. */
  get idle(): boolean {
    return this.req === undefined && this.buf === null && this.socket.writableLength === 0;
  }

  /** Ends the connection if one of its timeouts has passed; says which. */
  expire(now: number, o: FastPathOptions): TimeoutPhase | undefined {
    // A client that does not take its answers is the write timeout's (client-connections.ts).
    if (this.awaitingDrain) return undefined;
    if (this.req === undefined) {
      if (this.buf === null) {
        // Answer bytes not yet taken are the write timeout's too.
        if (this.socket.writableLength > 0 || now - this.since < o.keepAliveTimeoutMs) return undefined;
        this.socket.destroy();
        return 'keep_alive';
      }
      if (this.closing || now - this.since < o.headersTimeoutMs) return undefined;
      this.closing = true;
      this.buf = null;
      endWithAnswer(this.socket, clientErrorResponse({ error: 'request_timeout', message: `the request head did not arrive within ${o.headersTimeoutMs} ms` }));
      return 'head';
    }
    // Answered, with body bytes still to come that nobody reads.
    if (this.bodyLeft === 0 || this.res?.writableFinished !== true) return undefined;
    const phase = now - this.readAt >= (o.bodyIdleTimeoutMs ?? o.headersTimeoutMs) ? 'body_idle' : now - this.headAt >= (o.bodyTimeoutMs ?? o.headersTimeoutMs) ? 'body_total' : undefined;
    if (phase !== undefined) this.socket.destroy();
    return phase;
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.closing) return;
    if (this.req !== undefined) this.readAt = Date.now();
    if (this.buf === null) {
      if (this.req === undefined) this.since = Date.now();
      this.buf = chunk;
    } else this.buf = Buffer.concat([this.buf, chunk]);
    this.pump();
  };

  private readonly onEnd = (): void => {
    // The client half-closed: like node:http, it gave up whatever is under way.
    this.closing = true;
    this.socket.end();
    this.abandon()?.clientGone();
  };

  private readonly onError = (): void => {
    // A reset or a failed write: `close` follows and ends the request under way.
  };

  private readonly onClose = (): void => {
    this.path.forget(this);
    this.abandon()?.clientGone();
  };

  private readonly onDrain = (): void => {
    this.awaitingDrain = false;
    this.socket.resume();
    this.pump();
  };

  /** Drops the request under way and whatever was read after it; returns its response. */
  private abandon(): FastResponse | undefined {
    const res = this.res;
    this.req = undefined;
    this.res = undefined;
    this.buf = null;
    return res;
  }

  /** A response was written to its end. */
  responseEnded(keepAlive: boolean): void {
    if (!keepAlive) {
      // Unread body and pipelined requests are dropped with the connection. It stays tracked
      // until it closes, so a client that never closes its side is still timed out and drained.
      this.closing = true;
      this.abandon();
      this.socket.end();
      return;
    }
    this.socket.resume();
    this.pump();
  }

  /** Moves the connection forward: body bytes to the request, then the next request head. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (;;) {
        const req = this.req;
        if (req !== undefined) {
          const buf = this.buf;
          if (this.bodyLeft > 0 && buf !== null) {
            const n = Math.min(this.bodyLeft, buf.length);
            this.buf = n === buf.length ? null : buf.subarray(n);
            this.bodyLeft -= n;
            req.push(n === buf.length ? buf : buf.subarray(0, n));
            if (this.bodyLeft === 0) req.finish();
          }
          if (this.bodyLeft > 0 || this.res?.writableFinished !== true) {
            // Pipelined requests wait; a client that sends too many ahead is paused.
            if (this.buf !== null && this.buf.length > this.path.options.maxHeadBytes) this.socket.pause();
            return;
          }
          // Answered, and its body (read or not) consumed: ready for the next request.
          this.req = undefined;
          this.res = undefined;
          this.since = Date.now();
          continue;
        }
        if (this.buf === null) return;
        if (this.socket.writableNeedDrain) return this.awaitDrain();
        const scan = scanRequestHead(this.buf, this.path.options.maxHeadBytes);
        if (scan.kind === 'incomplete') return;
        if (scan.kind === 'other') return this.handOff();
        this.buf = this.buf.length === scan.bytes ? null : this.buf.subarray(scan.bytes);
        this.start(scan.head);
      }
    } finally {
      this.pumping = false;
    }
  }

  /**
   * A client that sends requests and does not read the answers: the next one waits until it
   * has, so answers do not pile up in the connection's queue (node:http pauses the same way).
   */
  private awaitDrain(): void {
    this.awaitingDrain = true;
    this.socket.pause();
    this.socket.once('drain', this.onDrain);
  }

  private start(head: RequestHead): void {
    if (head.contentLength > 0) this.headAt = this.readAt = Date.now();
    const req = new FastRequest(head, this.socket);
    const res = new FastResponse(this, head, this.path);
    this.req = req;
    this.res = res;
    this.bodyLeft = head.contentLength;
    this.path.handle(req, res);
    if (this.bodyLeft === 0) req.finish();
  }

  private handOff(): void {
    const s = this.socket;
    s.removeListener('data', this.onData);
    s.removeListener('end', this.onEnd);
    s.removeListener('error', this.onError);
    s.removeListener('close', this.onClose);
    s.pause();
    if (this.buf !== null) s.unshift(this.buf);
    this.buf = null;
    this.path.handOff(this);
    // Flows again into node:http's parser, the unshifted bytes first.
    s.resume();
  }
}

/** The request as the handler sees it; body chunks arrive as the connection reads them. */
class FastRequest implements DownstreamRequest {
  readonly method: string;
  readonly url: string;
  readonly rawHeaders: string[];
  private onBody: ((chunk: Buffer) => void) | undefined;
  private onEnd: (() => void) | undefined;

  constructor(
    head: RequestHead,
    readonly socket: Socket,
  ) {
    this.method = head.method;
    this.url = head.url;
    this.rawHeaders = head.rawHeaders;
  }

  on(event: 'data' | 'end', listener: ((chunk: Buffer) => void) | (() => void)): this {
    if (event === 'data') this.onBody = listener;
    else this.onEnd = listener as () => void;
    return this;
  }

  /** A handler that did not listen has its body dropped, as node:http does. */
  push(chunk: Buffer): void {
    this.onBody?.(chunk);
  }

  finish(): void {
    this.onEnd?.();
  }

  release(chunk: Buffer): void {
    // A chunk that is a whole read is no longer in the connection's buffer (pump cleared it).
    releaseRead(chunk);
  }
}

/** Status lines by code, each built the first time it is sent. */
const statusLines = new Map<number, string>();

function statusLine(status: number): string {
  let line = statusLines.get(status);
  if (line === undefined) {
    line = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    statusLines.set(status, line);
  }
  return line;
}

/** `Date` for responses the router makes itself, formatted once a second. */
let dateSecond = 0;
let dateText = '';
function httpDate(): string {
  const now = Date.now();
  const s = Math.floor(now / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

/**
 * The response, written straight to the socket: the head goes with the first body bytes in one
 * write; without a Content-Length the body is chunked, unless it is all given to `end`, which
 * then sets the length (as node:http does).
 */
class FastResponse implements DownstreamResponse {
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  private status = 200;
  private headers: string[] = [];
  private extra: [string, string][] | undefined;
  private flushed = false;
  private chunked = false;
  private keepAlive: boolean;
  private readonly noBody: boolean;
  private onClose: (() => void) | undefined;

  constructor(
    private readonly conn: ClientConnection,
    head: RequestHead,
    private readonly path: FastPath,
  ) {
    this.keepAlive = !head.close;
    this.noBody = head.method === 'HEAD';
  }

  setHeader(name: string, value: string): this {
    (this.extra ??= []).push([name.toLowerCase(), value]);
    return this;
  }

  writeHead(status: number, headers: string[]): this {
    this.status = status;
    this.headers = headers;
    this.headersSent = true;
    return this;
  }

  write(chunk: Buffer): boolean {
    const s = this.conn.socket;
    if (this.destroyed || this.writableFinished) return true;
    const head = this.flushed ? undefined : this.head(undefined);
    if (!this.chunked) return head === undefined ? s.write(chunk) : writeHeadAndBody(s, head, chunk);
    s.cork();
    if (head !== undefined) s.write(head, 'latin1');
    s.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
    s.write(chunk);
    const ok = s.write('\r\n', 'latin1');
    s.uncork();
    return ok;
  }

  end(data?: string): this {
    if (this.destroyed || this.writableFinished) return this;
    const s = this.conn.socket;
    s.cork();
    if (!this.flushed) s.write(this.head(data === undefined ? 0 : Buffer.byteLength(data)), 'latin1');
    if (data !== undefined && data.length > 0 && !this.noBody) s.write(data);
    if (this.chunked) s.write('0\r\n\r\n', 'latin1');
    s.uncork();
    this.writableFinished = true;
    this.conn.responseEnded(this.keepAlive && !this.path.draining);
    return this;
  }

  destroy(): this {
    if (!this.destroyed) {
      this.destroyed = true;
      this.conn.socket.destroy();
    }
    return this;
  }

  on(_event: 'close', listener: () => void): this {
    this.onClose = listener;
    return this;
  }

  /** The connection closed before the response ended. */
  clientGone(): void {
    this.destroyed = true;
    if (!this.writableFinished) this.onClose?.();
  }

  /** The status line and header block; `length` is the whole body's when `end` gives it all. */
  private head(length: number | undefined): string {
    this.flushed = true;
    const status = this.status;
    const h = this.headers;
    let out = statusLine(status);
    let date = false;
    let hasLength = false;
    for (let i = 0; i < h.length; i += 2) {
      const k = h[i] as string;
      out += `${k}: ${h[i + 1] as string}\r\n`;
      if (k === 'date') date = true;
      else if (k === 'content-length') hasLength = true;
    }
    if (this.extra !== undefined) for (const [k, v] of this.extra) if (fieldValue(h, k) === undefined) out += `${k}: ${v}\r\n`;
    if (!date) out += `date: ${httpDate()}\r\n`;
    const connection = fieldValue(h, 'connection') ?? this.extra?.find(([k]) => k === 'connection')?.[1];
    if (connection !== undefined && connection.toLowerCase() === 'close') this.keepAlive = false;
    const bodiless = this.noBody || status === 204 || status === 304 || status < 200;
    if (!bodiless && !hasLength) {
      if (length !== undefined) out += `content-length: ${length}\r\n`;
      else {
        this.chunked = true;
        out += 'transfer-encoding: chunked\r\n';
      }
    }
    if (connection === undefined && (!this.keepAlive || this.path.draining)) out += 'connection: close\r\n';
    // Said as node:http says it: a client that knows when an idle connection closes lets go of it
    // first, instead of sending a request as the router closes it (reset; fetch retries no POST).
    else if (connection === undefined) out += this.path.keepAliveField;
    return `${out}\r\n`;
  }
}
