import type { IncomingMessage, ServerResponse } from 'node:http';
import { status } from '@grpc/grpc-js';
import { ModelmuxError } from '../../common/errors.js';
import { SlotSet } from '../../common/slot-set.js';
import { framedMessage, PREFIX_BYTES, UnaryMessageReader } from '../../common/grpc/grpc-frame.js';
import { http1AnswerHeaders } from '../../common/grpc/grpc-http1-form.js';
import { grpcTimeoutMs } from '../../common/grpc/grpc-timeout.js';
import { UNSERVED_METHODS } from '../../common/grpc/inference-service.js';
import { grpcError, grpcStatus, type CallMetadata } from '../../common/grpc/status.js';
import { metadataValueOf, responseHeaders, type CancelReason, type ServedCall, type ServedHandler } from '../../common/grpc/unary-call.js';
import { frameRefusal, messageTimedOut, sweepEveryMs, type UnaryServerEvents, type UnaryServerLimits } from '../../common/grpc/unary-server.js';

export interface GrpcHttp1Options {
  /** The gRPC port's handlers, by full path (grpc-server.ts). */
  methods: ReadonlyMap<string, ServedHandler>;
  /** The gRPC port's bounds of a call: its message size (--max-body-bytes), message timeouts and write timeout. */
  limits: Pick<UnaryServerLimits, 'maxMessageBytes' | 'messageTimeoutMs' | 'messageIdleTimeoutMs' | 'writeTimeoutMs'>;
  /** The gRPC port's events: a bound that ended a call, a call answered before any handler. */
  events: Pick<UnaryServerEvents, 'timedOut' | 'callRefused'>;
}

type Refusal = ModelmuxError | { code: status; details: string };

/**
 * The router's gRPC calls over the replica's HTTP/1.1 port (common/grpc/grpc-http1-form.ts, ADR
 * 0054), served by the same handlers as the gRPC port and under its bounds: the message size,
 * refused from Content-Length or the 5-byte prefix; the message's total and idle timeouts, the
 * call's deadline (its grpc-timeout) and the answer's write timeout, all kept by one sweep as the
 * gRPC port's. The answer goes out whole in one write. The connection closing before the answer
 * cancels the call, as a reset stream does.
 */
export class GrpcHttp1Server {
  /** Not a Set: common/slot-set.ts. */
  private readonly calls = new SlotSet<'slot', Http1Call>('slot');
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly opts: GrpcHttp1Options) {
    const l = opts.limits;
    this.sweeper = setInterval(() => this.sweep(), sweepEveryMs(Math.min(l.messageTimeoutMs, l.messageIdleTimeoutMs, l.writeTimeoutMs)));
    this.sweeper.unref();
  }

  /** Serves one request of the form (isGrpcHttp1Request). */
  readonly serve = (req: IncomingMessage, res: ServerResponse): void => {
    const path = req.url ?? '';
    const timeout = req.headers['grpc-timeout'];
    const timeoutMs = timeout === undefined ? Number.POSITIVE_INFINITY : typeof timeout === 'string' ? grpcTimeoutMs(timeout) : undefined;
    const now = Date.now();
    const call = new Http1Call(req, res, path.slice(path.lastIndexOf('/') + 1), now + (timeoutMs ?? 0), now);
    this.calls.add(call);
    res.once('close', () => {
      this.calls.delete(call);
      // Closed unanswered: a router that gives up at or past the call's deadline is the deadline's.
      call.cancel(Date.now() >= call.deadlineAt ? 'deadline' : 'client');
    });
    if (timeoutMs === undefined) return this.refuse(call, new ModelmuxError('invalid_request', `the grpc-timeout header "${String(timeout)}" is malformed`));
    const handler = this.opts.methods.get(path);
    if (handler === undefined) return this.refuse(call, { code: status.UNIMPLEMENTED, details: UNSERVED_METHODS.get(path) ?? `the server does not implement ${path}` });
    const max = this.opts.limits.maxMessageBytes;
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > PREFIX_BYTES + max) return this.refuse(call, frameRefusal({ reason: 'too_large', length: declared - PREFIX_BYTES }, max));
    const reader = new UnaryMessageReader(max);
    req.on('data', (chunk: Buffer) => {
      if (call.phase !== 'message') return;
      call.lastByteAt = Date.now();
      const s = reader.push(chunk);
      if (s.kind === 'refused') this.refuse(call, frameRefusal(s, max));
      else if (s.kind === 'complete') call.message = s.message;
    });
    req.once('end', () => {
      if (call.phase !== 'message') return;
      if (reader.announced === undefined || call.message.length !== reader.announced)
        return this.refuse(call, new ModelmuxError('invalid_request', 'the call ended before its request message was whole'));
      call.phase = 'handling';
      try {
        handler(call);
      } catch (err) {
        call.fail(status.INTERNAL, `unexpected server error: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
  };

  close(): void {
    clearInterval(this.sweeper);
  }

  /** Answers a call the server ends itself, before or instead of its handler. */
  private refuse(call: Http1Call, err: Refusal): void {
    if (call.phase === 'writing' || call.phase === 'done') return;
    if (err instanceof ModelmuxError) {
      const g = grpcError(err);
      call.fail(g.code, g.details, g.metadata);
      this.opts.events.callRefused(call.method, grpcStatus(err.code), err);
    } else {
      call.fail(err.code, err.details);
      this.opts.events.callRefused(call.method, err.code, undefined);
    }
  }

  private sweep(): void {
    const now = Date.now();
    const l = this.opts.limits;
    this.calls.forEach((call) => {
      const late = call.phase === 'message' ? messageTimedOut(now, call.openedAt, call.lastByteAt, l) : undefined;
      if (late !== undefined) {
        this.opts.events.timedOut(late.phase);
        this.refuse(call, late.error);
      } else if ((call.phase === 'message' || call.phase === 'handling') && now >= call.deadlineAt) {
        call.cancel('deadline');
        this.refuse(call, { code: status.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
      } else if (call.phase === 'writing' && call.stalled(now, l.writeTimeoutMs)) {
        this.opts.events.timedOut('write');
        call.destroy();
      }
    });
  }
}

type Http1CallPhase = 'message' | 'handling' | 'writing' | 'done';

/** One call of the form: its request headers and message, and its one answer, written whole. */
class Http1Call implements ServedCall {
  phase: Http1CallPhase = 'message';
  /** GrpcHttp1Server's own: the call's place among the open ones. */
  slot = -1;
  message: Buffer = Buffer.alloc(0);
  lastByteAt: number;
  private movedAt = 0;
  private movedBytes = 0;
  private cancelledFlag = false;
  private listeners: ((why: CancelReason) => void)[] = [];

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    /** The method's name, the last segment of the path. */
    readonly method: string,
    /** From the call's grpc-timeout, on Date.now()'s clock; infinite without one. */
    readonly deadlineAt: number,
    readonly openedAt: number,
  ) {
    this.lastByteAt = openedAt;
  }

  get cancelled(): boolean {
    return this.cancelledFlag;
  }

  metadataValue(key: string): string | undefined {
    return metadataValueOf(this.req.headers, key);
  }

  onCancel(f: (why: CancelReason) => void): void {
    this.listeners.push(f);
  }

  answer(message: Buffer, headers?: CallMetadata, trailers?: CallMetadata): void {
    const body = framedMessage(message);
    this.write(http1AnswerHeaders(responseHeaders(headers), { ...responseHeaders(trailers), 'grpc-status': String(status.OK) }), body);
  }

  fail(code: status, details: string, metadata?: CallMetadata, headers?: CallMetadata): void {
    this.write(http1AnswerHeaders(responseHeaders(headers), { ...responseHeaders(metadata), 'grpc-status': String(code), 'grpc-message': encodeURI(details) }), undefined);
  }

  /** Whether the answer's bytes have not moved to the router for `writeTimeoutMs` (as the gRPC port's write timeout). */
  stalled(now: number, writeTimeoutMs: number): boolean {
    const socket = this.res.socket;
    // The whole answer is written at once: progress is its bytes leaving the socket's buffer.
    const written = socket === null ? this.movedBytes : socket.bytesWritten - socket.writableLength;
    if (written !== this.movedBytes) {
      this.movedBytes = written;
      this.movedAt = now;
    }
    return now - this.movedAt >= writeTimeoutMs;
  }

  destroy(): void {
    this.res.destroy();
  }

  cancel(why: CancelReason): void {
    if (this.cancelledFlag || this.phase === 'writing' || this.phase === 'done') return;
    this.cancelledFlag = true;
    const listeners = this.listeners;
    this.listeners = [];
    for (const f of listeners) f(why);
  }

  private write(headers: ReturnType<typeof http1AnswerHeaders>, body: Buffer | undefined): void {
    if (this.phase === 'writing' || this.phase === 'done') return;
    const refusedEarly = this.phase === 'message';
    this.phase = 'writing';
    this.movedAt = Date.now();
    const res = this.res;
    if (res.headersSent || res.destroyed) return;
    headers['content-length'] = body === undefined ? 0 : body.length;
    // The rest of a body the call will not read: the connection is not reused for another call.
    if (refusedEarly) {
      headers.connection = 'close';
      this.req.resume();
    }
    res.writeHead(200, headers);
    res.once('finish', () => {
      this.phase = 'done';
    });
    res.end(body);
  }
}
