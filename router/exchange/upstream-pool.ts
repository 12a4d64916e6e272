import { connect, type Socket } from 'node:net';
import { ResponseParser, type ResponseHead, type ResponseSink } from './http1-response.js';
import { READ_BUFFER, readBytes } from '../http1/socket-read.js';
import { writeHeadAndBody } from '../http1/socket-write.js';
import type { BodyBuffer, BodyFollower } from './body-buffer.js';

/** One try's request: the body is whole (the router buffers it so that a retry can resend it). */
export interface UpstreamRequest {
  method: string;
  /** Origin-form target, already checked by the router's request parser. */
  path: string;
  /** Flat `[name, value, …]` list without host, content-length and hop-by-hop fields. */
  headers: readonly string[];
  body: Buffer | null;
  /**
   * Set when `body` lies in a pooled buffer: each write of it holds the buffer until the socket
   * is done with it. While the buffer has fewer than `body.length` bytes the body is still
   * arriving: the try sends what is there and then each piece as it lands (cut-through).
   */
  bodyBuffer?: BodyBuffer | undefined;
}

/** Given to the handler with every call; stale once the response has ended or failed. */
export interface UpstreamController {
  /** Stops the try: the connection is closed and `onResponseError(err)` follows at once. */
  abort(err: Error): void;
  /** Back-pressure from the client: stop and resume reading the response. */
  pause(): void;
  resume(): void;
}

/** Exactly one of onResponseEnd and onResponseError ends every dispatched try. */
export interface UpstreamHandler {
  onRequestStart(controller: UpstreamController): void;
  /** `headers`: flat `[name, value, …]`, names lowercased (ResponseHead). */
  onResponseStart(controller: UpstreamController, status: number, headers: string[]): void;
  onResponseData(controller: UpstreamController, chunk: Buffer): void;
  onResponseEnd(controller: UpstreamController): void;
  onResponseError(controller: UpstreamController, err: Error): void;
}

export interface UpstreamPoolOptions {
  /** Most connections open at once; further tries wait in order. */
  connections: number;
  /** Longest a connection stays idle (shortened by the server's own Keep-Alive timeout). */
  keepAliveTimeoutMs: number;
  maxHeadBytes?: number;
}

/** The connection closed (or was reset) before any byte of the response: the try never got an answer. */
export class UpstreamClosedError extends Error {
  readonly code = 'UPSTREAM_CLOSED';
}

/** Reuse margin before the server's announced idle timeout, so both ends do not close at once. */
const KEEP_ALIVE_MARGIN_MS = 1000;
const DEFAULT_MAX_HEAD_BYTES = 64 * 1024;

/**
 * Keep-alive HTTP/1.1 connections to one replica, owned by the router (ADR 0019): one request
 * per connection at a time, the request head and body written in one corked write, the
 * response parsed by `ResponseParser` and handed to the try's handler as it arrives. It does
 * only what the router needs of an HTTP client, which is what makes it cheaper than a
 * general one: no redirects, no timers per request (the router's deadlines cover tries), and a
 * request body only ever from the router's own buffer of it: one still arriving is followed
 * there, written as views of that buffer, so a replica that reads slowly holds no copy.
 */
export class UpstreamPool {
  private readonly host: string;
  private readonly port: number;
  /** The end of every request line and the Host field, the same for every try. */
  private readonly lineEnd: string;
  private readonly idle: Connection[] = [];
  private readonly waiting: Attempt[] = [];
  private open = 0;
  private closing = false;
  private closed: (() => void) | undefined;
  private readonly sweep: NodeJS.Timeout;

  constructor(
    url: string,
    readonly options: UpstreamPoolOptions,
  ) {
    const u = new URL(url);
    if (u.protocol !== 'http:') throw new Error(`upstream ${url}: only http: is supported`);
    this.host = u.hostname.replace(/^\[|\]$/g, '');
    this.port = u.port === '' ? 80 : Number(u.port);
    this.lineEnd = ` HTTP/1.1\r\nhost: ${u.host}\r\n`;
    this.sweep = setInterval(() => this.closeExpired(Date.now()), Math.min(1000, options.keepAliveTimeoutMs));
    this.sweep.unref();
  }

  get maxHeadBytes(): number {
    return this.options.maxHeadBytes ?? DEFAULT_MAX_HEAD_BYTES;
  }

  /** Connections open now (busy and idle). */
  get connections(): number {
    return this.open;
  }

  dispatch(request: UpstreamRequest, handler: UpstreamHandler): void {
    const attempt = new Attempt(this, request, handler);
    handler.onRequestStart(attempt);
    if (this.closing) return attempt.fail(new UpstreamClosedError('the replica left the route'));
    if (attempt.state !== 'queued') return;
    const conn = this.takeIdle(Date.now());
    if (conn !== undefined) return conn.send(attempt);
    if (this.open < this.options.connections) return this.newConnection().send(attempt);
    this.waiting.push(attempt);
  }

  /** The request head, built once per try. */
  head(r: UpstreamRequest): string {
    let head = `${r.method} ${r.path}${this.lineEnd}`;
    const h = r.headers;
    for (let i = 0; i + 1 < h.length; i += 2) head += `${h[i] as string}: ${h[i + 1] as string}\r\n`;
    if (r.body !== null) head += `content-length: ${r.body.length}\r\n`;
    return `${head}\r\n`;
  }

  /** Takes no new tries; resolves once the tries under way have ended and every connection is closed. */
  close(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweep);
    for (const a of this.waiting.splice(0)) a.fail(new UpstreamClosedError('the replica left the route'));
    for (const c of this.idle.splice(0)) c.destroy();
    if (this.open === 0) return Promise.resolve();
    return new Promise((resolve) => (this.closed = resolve));
  }

  /** A connection finished its try and may take another. */
  released(conn: Connection, now: number): void {
    const next = this.waiting.shift();
    if (next !== undefined) return conn.send(next);
    if (this.closing) return conn.destroy();
    conn.idleSince = now;
    this.idle.push(conn);
  }

  /** A connection closed, for whatever reason. */
  gone(conn: Connection): void {
    this.open--;
    const i = this.idle.indexOf(conn);
    if (i !== -1) this.idle.splice(i, 1);
    if (this.closing) {
      if (this.open === 0) this.closed?.();
      return;
    }
    // A try that waited for a free connection gets a new one.
    const next = this.waiting.shift();
    if (next !== undefined) this.newConnection().send(next);
  }

  /** A waiting try was aborted before it got a connection. */
  unqueue(attempt: Attempt): void {
    const i = this.waiting.indexOf(attempt);
    if (i !== -1) this.waiting.splice(i, 1);
  }

  /** A socket whose reads land in the router's shared READ_BUFFER (net's `onread`); `onRead` gets the bytes read, false pauses. */
  newSocket(onRead: (bytes: number) => boolean): Socket {
    return connect({ host: this.host, port: this.port, noDelay: true, onread: { buffer: READ_BUFFER, callback: onRead } });
  }

  /** The most recently idled connection that is still within its idle limit. */
  private takeIdle(now: number): Connection | undefined {
    for (;;) {
      const c = this.idle.pop();
      if (c === undefined || now - c.idleSince < c.idleLimitMs) return c;
      c.destroy();
    }
  }

  private closeExpired(now: number): void {
    for (const c of this.idle.filter((x) => now - x.idleSince >= x.idleLimitMs)) c.destroy();
  }

  private newConnection(): Connection {
    this.open++;
    return new Connection(this);
  }
}

type AttemptState = 'queued' | 'sent' | 'responding' | 'ended';

interface Streamed {
  held: BodyBuffer;
  body: Buffer;
  sent: number;
  writing: boolean;
}

/** One try: the controller its handler holds, valid until the try ends. */
class Attempt implements UpstreamController {
  state: AttemptState = 'queued';
  conn: Connection | undefined;

  constructor(
    readonly pool: UpstreamPool,
    readonly request: UpstreamRequest,
    readonly handler: UpstreamHandler,
  ) {}

  abort(err: Error): void {
    if (this.state === 'ended') return;
    if (this.conn !== undefined) this.conn.abort(this, err);
    else {
      this.pool.unqueue(this);
      this.fail(err);
    }
  }

  pause(): void {
    if (this.state !== 'ended') this.conn?.socket.pause();
  }

  resume(): void {
    if (this.state !== 'ended') this.conn?.socket.resume();
  }

  fail(err: Error): void {
    if (this.state === 'ended') return;
    this.state = 'ended';
    this.conn = undefined;
    this.handler.onResponseError(this, err);
  }

  end(): void {
    if (this.state === 'ended') return;
    this.state = 'ended';
    this.conn = undefined;
    this.handler.onResponseEnd(this);
  }
}

/** One keep-alive socket to the replica and the try on it, if any. */
class Connection implements ResponseSink, BodyFollower {
  readonly socket: Socket;
  private readonly parser: ResponseParser;
  private attempt: Attempt | undefined;
  private head: ResponseHead | undefined;
  private dead = false;
  /**
   * A body still arriving, followed: its buffer, its bytes, how many of them were handed to the
   * socket, and whether that write is still under way (one at a time: what comes meanwhile goes
   * in the next, so a replica that reads slowly gets fewer, larger writes and no queue of them).
   */
  private streamed: Streamed | undefined;
  /**
   * The try was answered before its body was all sent: the rest still goes to the replica (which
   * may read it to keep its connection), then the connection ends; it takes no other try.
   */
  private trailing = false;
  idleSince = 0;
  idleLimitMs: number;

  constructor(private readonly pool: UpstreamPool) {
    this.idleLimitMs = pool.options.keepAliveTimeoutMs;
    this.parser = new ResponseParser(this, pool.maxHeadBytes);
    this.socket = pool.newSocket(this.onRead);
    this.socket.on('end', this.onEnd);
    this.socket.on('error', this.onError);
    this.socket.on('close', this.onClose);
  }

  send(attempt: Attempt): void {
    if (attempt.state !== 'queued') return this.pool.released(this, Date.now());
    this.attempt = attempt;
    this.head = undefined;
    attempt.conn = this;
    attempt.state = 'sent';
    const r = attempt.request;
    this.parser.reset(r.method === 'HEAD');
    const held = r.bodyBuffer;
    if (held !== undefined && r.body !== null && held.received < r.body.length) return this.sendArriving(r, held, r.body);
    held?.retain();
    writeHeadAndBody(this.socket, this.pool.head(r), r.body, held === undefined ? undefined : () => held.release());
  }

  /** The head and the body's bytes already in, then each piece as it comes (`more`). */
  private sendArriving(r: UpstreamRequest, held: BodyBuffer, body: Buffer): void {
    const s: Streamed = { held, body, sent: held.received, writing: true };
    this.streamed = s;
    held.follow(this);
    held.retain();
    writeHeadAndBody(this.socket, this.pool.head(r), body.subarray(0, s.sent), () => this.written(s));
  }

  /** The socket is done with a write of the body (sent, failed or destroyed): what came meanwhile goes next. */
  private written(s: Streamed): void {
    s.writing = false;
    // The next write takes its hold before this one lets go: were this the last hold, the buffer
    // would go back to the pool and the next write would send another request's bytes.
    if (this.streamed === s) this.more();
    s.held.release();
  }

  /** BodyFollower: the bytes not yet sent go out as a view of the buffer, held until the socket is done with it. */
  more(): void {
    const s = this.streamed;
    if (s === undefined || s.writing) return;
    const to = Math.min(s.held.received, s.body.length);
    const from = s.sent;
    if (to > from) {
      s.sent = to;
      s.writing = true;
      s.held.retain();
      this.socket.write(s.body.subarray(from, to), () => this.written(s));
    }
    if (to < s.body.length) return;
    this.stopFollowing();
    if (this.trailing) this.socket.end();
  }

  /** BodyFollower: the body stops short; the replica must not wait for its rest. */
  cut(): void {
    this.destroy();
  }

  private stopFollowing(): void {
    const s = this.streamed;
    if (s === undefined) return;
    this.streamed = undefined;
    s.held.unfollow(this);
  }

  abort(attempt: Attempt, err: Error): void {
    if (this.attempt !== attempt) return;
    this.attempt = undefined;
    this.destroy();
    attempt.fail(err);
  }

  destroy(): void {
    this.dead = true;
    // The rest of a body still arriving is not sent: the replica sees its request cut, not a wait.
    this.stopFollowing();
    this.socket.destroy();
  }

  // --- ResponseSink: called from inside parser.execute ---------------------------------------

  onHead(head: ResponseHead): void {
    this.head = head;
    if (head.keepAliveMs !== undefined) this.idleLimitMs = Math.min(this.pool.options.keepAliveTimeoutMs, head.keepAliveMs - KEEP_ALIVE_MARGIN_MS);
    const a = this.attempt;
    if (a === undefined) return;
    a.state = 'responding';
    a.handler.onResponseStart(a, head.status, head.headers);
  }

  onBody(chunk: Buffer): void {
    const a = this.attempt;
    // The chunk is a view of the shared read buffer; the handler may keep what it is given.
    if (a !== undefined) a.handler.onResponseData(a, Buffer.from(chunk));
  }

  /** Read from `parser.complete` once `execute` returns, so the try ends outside the parser. */
  onComplete(): void {}

  // --- socket events ---------------------------------------------------------------------------

  private readonly onRead = (bytes: number): boolean => {
    this.read(readBytes(bytes));
    return true;
  };

  private read(chunk: Buffer): void {
    if (this.attempt === undefined) {
      // Nothing was asked: a server that talks out of turn cannot be trusted with the next try.
      return this.destroy();
    }
    try {
      this.parser.execute(chunk);
    } catch (err) {
      // Bytes after a complete response: the response stands, the connection goes.
      if (this.parser.complete) return this.finish(false);
      return this.failAttempt(err as Error);
    }
    if (this.parser.complete) this.finish(this.head?.reusable === true && !this.dead);
  }

  private readonly onEnd = (): void => {
    if (this.attempt === undefined) return this.destroy();
    try {
      this.parser.end();
    } catch (err) {
      return this.failAttempt(this.head === undefined ? new UpstreamClosedError(`replica closed the connection: ${(err as Error).message}`) : (err as Error));
    }
    this.finish(false);
  };

  private readonly onError = (err: Error): void => {
    this.dead = true;
    if (this.attempt !== undefined) this.failAttempt(err);
  };

  private readonly onClose = (): void => {
    this.dead = true;
    this.stopFollowing();
    if (this.attempt !== undefined) this.failAttempt(new UpstreamClosedError('the replica closed the connection'));
    this.pool.gone(this);
  };

  /** The response is complete: the try ends, then the connection is reused or closed. */
  private finish(reusable: boolean): void {
    const a = this.attempt;
    // The handler aborted the try from inside the parser's callbacks: it has ended already.
    if (a === undefined) return;
    this.attempt = undefined;
    if (!reusable) this.destroy();
    else if (this.streamed !== undefined) {
      // What the replica reads next is the rest of this body, not another request.
      this.dead = true;
      this.trailing = true;
    }
    a.end();
    if (!this.dead) {
      // A handler that paused the response leaves the socket paused: resume for the next try.
      this.socket.resume();
      this.pool.released(this, Date.now());
    }
  }

  private failAttempt(err: Error): void {
    const a = this.attempt;
    this.attempt = undefined;
    this.destroy();
    a?.fail(err);
  }
}
