import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { status } from '@grpc/grpc-js';
import type { ModelmuxError } from '../errors.js';
import type { CallStream } from './call-stream.js';
import { endWithMessage, PREFIX_BYTES, UnaryMessageReader } from './grpc-frame.js';
import { grpcError, type CallMetadata } from './status.js';
import { headersOf } from '../http2/header-fields.js';

/** Request headers of HTTP/2 and of gRPC's transport, never a call's metadata. */
export const TRANSPORT_HEADERS: readonly string[] = ['content-type', 'te', 'grpc-timeout', 'grpc-encoding', 'grpc-accept-encoding', 'accept-encoding', 'content-length'];

/** The first text value of a metadata key in a call's request headers; transport and binary headers are no metadata. */
export function metadataValueOf(headers: IncomingHttpHeaders | NodeJS.Dict<string | string[]>, key: string): string | undefined {
  if (key.endsWith('-bin') || TRANSPORT_HEADERS.includes(key)) return undefined;
  const v = headers[key];
  return typeof v === 'string' ? v : v?.[0];
}

const NO_BYTES = Buffer.alloc(0);

/** Response headers the server writes itself, whatever metadata a handler passes. */
const OWN_RESPONSE_HEADERS = new Set(['content-type', 'grpc-status', 'grpc-message', 'grpc-encoding', 'grpc-accept-encoding', 'date', 'content-length']);

/**
 * - message: the request message is arriving (its bytes are in the byte budget);
 * - handling: the message is whole and its handler runs (the bytes stay in the budget);
 * - writing: the answer is written (its bytes in the budget until the client has taken them);
 * - done: answered, failed or cancelled.
 */
export type CallPhase = 'message' | 'handling' | 'writing' | 'done';

/** Why a call was cancelled: its client reset it or went away (`client`), or its deadline passed. */
export type CancelReason = 'client' | 'deadline';

/** What a call tells its server: bytes it holds and hands back. */
export interface CallBudget {
  take(n: number): boolean;
  add(n: number): void;
  release(n: number): void;
  fullError(): ModelmuxError;
}

/**
 * What a method's handler uses of a call, whichever transport brought it: a stream of the
 * node:http2 server (UnaryCall) or the router's internal HTTP/1.1 form (grpc-http1-form.ts).
 */
export interface ServedCall {
  readonly message: Buffer;
  readonly cancelled: boolean;
  metadataValue(key: string): string | undefined;
  onCancel(f: (why: CancelReason) => void): void;
  answer(message: Buffer, headers?: CallMetadata, trailers?: CallMetadata): void;
  fail(code: status, details: string, metadata?: CallMetadata, headers?: CallMetadata): void;
}

/** A method's handler that needs no more of its call than ServedCall: it serves either transport. */
export type ServedHandler = (call: ServedCall) => void;

/**
 * One unary call of a gRPC server (unary-server.ts), on node:http2's stream or the router's own (call-stream.ts): its request headers and
 * message, its deadline, and the one answer it gets — a message with headers and trailers, or a
 * status (trailers-only). Every way it ends gives its bytes back to the budget once.
 */
export class UnaryCall implements ServedCall {
  phase: CallPhase = 'message';
  readonly openedAt: number;
  lastByteAt: number;
  /** The request message, once whole. */
  message: Buffer = NO_BYTES;
  /** The same bytes with their 5-byte prefix, as they came: what a forwarder sends on. */
  framed: Buffer = NO_BYTES;
  readonly reader: UnaryMessageReader;
  /** When the answer's bytes last moved to the client (writing phase). */
  movedAt = 0;
  movedBytes = 0;
  /** The stream's unsent answer bytes at the last check. */
  movedPending = 0;
  private held = 0;
  private cancelListeners: ((why: CancelReason) => void)[] = [];
  private answerClosedListener: (() => void) | undefined;
  private cancelledFlag = false;

  constructor(
    readonly stream: CallStream,
    readonly headers: IncomingHttpHeaders,
    /** The method's name (`ModelInfer`), the last segment of the path. */
    readonly method: string,
    /** The client's address, as the connection limits and reset budget count it. */
    readonly client: string,
    /** From the call's grpc-timeout, on Date.now()'s clock; infinite without one. */
    readonly deadlineAt: number,
    maxMessageBytes: number,
    private readonly budget: CallBudget,
    now: number,
  ) {
    this.openedAt = now;
    this.lastByteAt = now;
    this.reader = new UnaryMessageReader(maxMessageBytes);
  }

  /** The first text value of a metadata key, read from the request headers as they came (no Metadata built). */
  metadataValue(key: string): string | undefined {
    return metadataValueOf(this.headers, key);
  }

  /** The call's text metadata as a flat list of keys and values, as HTTP's raw headers (no Metadata built); transport and binary headers left out. */
  textMetadata(): string[] {
    const out: string[] = [];
    for (const [key, value] of Object.entries(this.headers)) if (typeof value === 'string' && !key.startsWith(':') && !key.endsWith('-bin') && !TRANSPORT_HEADERS.includes(key)) out.push(key, value);
    return out;
  }

  get cancelled(): boolean {
    return this.cancelledFlag;
  }

  get heldBytes(): number {
    return this.held;
  }

  /** Runs `f` once if the call is cancelled (reset by the client, its deadline passed, its connection gone) before its answer. */
  onCancel(f: (why: CancelReason) => void): void {
    this.cancelListeners.push(f);
  }

  /**
   * Runs `f` when the stream closes after the answer started (at its end too): a forwarder's
   * watch on an answer it relays, without a `close` listener on the stream per call.
   */
  onAnswerClosed(f: () => void): void {
    this.answerClosedListener = f;
  }

  /** Takes `n` more bytes of the budget for this call; false (nothing taken) when they do not fit. */
  take(n: number): boolean {
    if (!this.budget.take(n)) return false;
    this.held += n;
    return true;
  }

  /** Answers `message` with the handler's headers and trailers; status OK. */
  answer(message: Buffer, headers?: CallMetadata, trailers?: CallMetadata): void {
    if (this.phase === 'done' || this.phase === 'writing') return;
    this.releaseHeld();
    // Counted past the limit if need be: the answer exists either way; a client that does not
    // take it is cut by the write timeout and the bytes come back.
    this.held = PREFIX_BYTES + message.length;
    this.budget.add(this.held);
    this.phase = 'writing';
    this.movedAt = this.lastByteAt = Date.now();
    const s = this.stream;
    try {
      s.respond({ ...responseHeaders(headers), ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      s.once('wantTrailers', () => {
        try {
          s.sendTrailers({ ...responseHeaders(trailers), 'grpc-status': String(status.OK) });
        } catch {
          // The stream is gone: its close gives the bytes back.
        }
      });
      endWithMessage(s, message);
    } catch {
      this.finish();
    }
  }

  /**
   * Starts an answer relayed as it comes (the router's forwarder): `fields` (the answer's
   * metadata as names and values, without pseudo-headers or the ones the server writes itself, as
   * the forwarder's answerFields leaves them out: not checked again here) go out now, then
   * `relay` each piece of the message, then `end` with the trailers. Each piece counts in the
   * byte budget until the stream has taken it, and the write timeout watches the whole answer.
   */
  startAnswer(fields: readonly string[]): boolean {
    if (this.phase === 'done' || this.phase === 'writing') return false;
    this.releaseHeld();
    this.phase = 'writing';
    this.movedAt = this.lastByteAt = Date.now();
    const head = [':status', '200', 'content-type', 'application/grpc'];
    for (const f of fields) head.push(f);
    const s = this.stream;
    try {
      if (s.respondFields !== undefined) s.respondFields(head, { waitForTrailers: true });
      else s.respond(headersOf(head), { waitForTrailers: true });
      return true;
    } catch {
      this.finish();
      return false;
    }
  }

  /** Writes one piece of a started answer; false when the stream's buffer is full (wait for its `drain`). */
  relay(chunk: Buffer): boolean {
    if (this.phase !== 'writing' || this.stream.destroyed) return true;
    this.held += chunk.length;
    this.budget.add(chunk.length);
    return this.stream.write(chunk, () => {
      // After the stream's close the bytes were given back with the rest.
      if (this.held < chunk.length) return;
      this.held -= chunk.length;
      this.budget.release(chunk.length);
    });
  }

  /** Ends a started answer with `trailers`, names and values (its grpc-status among them). */
  end(trailers: readonly string[]): void {
    const s = this.stream;
    if (this.phase !== 'writing' || s.destroyed || s.writableEnded) return;
    if (s.endWithTrailers !== undefined) return s.endWithTrailers(trailers);
    s.once('wantTrailers', () => {
      try {
        s.sendTrailers(headersOf(trailers));
      } catch {
        // The stream is gone: its close gives the bytes back.
      }
    });
    s.end();
  }

  /** Ends the call with a status and no message (trailers-only), its `metadata` in the same frame. */
  fail(code: status, details: string, metadata?: CallMetadata, headers?: CallMetadata): void {
    this.failWithHeaders(code, details, { ...responseHeaders(headers), ...responseHeaders(metadata) });
  }

  /** `fail` with the metadata as HTTP/2 headers, as a forwarder has them. */
  failWithHeaders(code: status, details: string, headers: OutgoingHttpHeaders): void {
    if (this.phase === 'done' || this.phase === 'writing') return;
    const unread = this.phase === 'message';
    this.phase = 'done';
    this.releaseHeld();
    const s = this.stream;
    try {
      if (!s.headersSent && !s.destroyed) {
        s.respond({ ...ownHeaders(headers), ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': encodeURI(details) }, { endStream: true });
      }
      // The rest of a message the call will not read: the client is asked to stop sending (RFC 9113
      // §8.1), once the status has gone out: a reset submitted with it can overtake it.
      if (unread) setImmediate(() => s.destroyed || s.close(constants.NGHTTP2_NO_ERROR));
    } catch {
      // The stream is gone already.
    }
  }

  /** Ends the call with a catalogue error: its gRPC status, and its code in the trailers. */
  failWith(err: ModelmuxError, metadata: CallMetadata = {}): void {
    const e = grpcError(err, metadata);
    this.fail(e.code, e.details, e.metadata);
  }

  /** The stream is closed: the bytes go back; an unanswered call is cancelled. Returns whether it was unanswered. */
  closed(): boolean {
    const unanswered = this.phase === 'message' || this.phase === 'handling';
    const answering = this.phase === 'writing';
    this.finish();
    if (answering) this.answerClosedListener?.();
    return unanswered;
  }

  /** Marks the call cancelled and tells its handler why. */
  cancel(why: CancelReason): void {
    if (this.cancelledFlag || this.phase === 'done' || this.phase === 'writing') return;
    this.cancelledFlag = true;
    const listeners = this.cancelListeners;
    this.cancelListeners = [];
    for (const f of listeners) f(why);
  }

  private finish(): void {
    // Closed unanswered: a client that gives up at or past the call's deadline is the deadline's.
    if (this.phase === 'message' || this.phase === 'handling') this.cancel(Date.now() >= this.deadlineAt ? 'deadline' : 'client');
    this.phase = 'done';
    this.releaseHeld();
  }

  private releaseHeld(): void {
    if (this.held === 0) return;
    this.budget.release(this.held);
    this.held = 0;
  }
}

/** A handler's metadata as HTTP headers, without the ones the server writes itself. */
export function responseHeaders(md: CallMetadata | undefined): OutgoingHttpHeaders {
  return md === undefined ? {} : ownHeaders(md);
}

/** `headers` without the ones the server writes itself. */
function ownHeaders(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [key, value] of Object.entries(headers)) if (!key.startsWith(':') && !OWN_RESPONSE_HEADERS.has(key)) out[key] = value;
  return out;
}
