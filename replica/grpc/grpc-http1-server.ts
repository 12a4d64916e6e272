import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Metadata, status } from '@grpc/grpc-js';
import { ModelmuxError } from '../../common/errors.js';
import { messagePrefix, PREFIX_BYTES, UnaryMessageReader } from '../../common/grpc/grpc-frame.js';
import { http1AnswerHeaders } from '../../common/grpc/grpc-http1-form.js';
import { grpcTimeoutMs } from '../../common/grpc/grpc-timeout.js';
import { UNSERVED_METHODS } from '../../common/grpc/inference-service.js';
import { grpcError, grpcStatus } from '../../common/grpc/status.js';
import { metadataValueOf, responseHeaders, type CancelReason, type ServedCall, type ServedHandler } from '../../common/grpc/unary-call.js';
import { frameRefusal } from '../../common/grpc/unary-server.js';

export interface GrpcHttp1Options {
  /** The gRPC port's handlers, by full path (grpc-server.ts). */
  methods: ReadonlyMap<string, ServedHandler>;
  /** The HTTP port's body limit (--max-body-bytes), as the gRPC port's message limit. */
  maxMessageBytes: number;
  /** A call answered before any handler: malformed, too large (the gRPC port's callRefused). */
  refused(method: string, code: status): void;
}

/**
 * The router's gRPC calls over the replica's HTTP/1.1 port (common/grpc/grpc-http1-form.ts, ADR
 * 0054), served by the same handlers as the gRPC port: the message is read under the HTTP port's
 * bounds (its body limit, refused from the prefix or Content-Length; node:http's request and
 * headers timeouts), the call's deadline is its grpc-timeout, and the answer goes out whole in
 * one write. The connection closing before the answer cancels the call, as a reset stream does.
 */
export function grpcHttp1Server(opts: GrpcHttp1Options): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const path = req.url ?? '';
    const method = path.slice(path.lastIndexOf('/') + 1);
    const timeout = req.headers['grpc-timeout'];
    const timeoutMs = timeout === undefined ? Number.POSITIVE_INFINITY : typeof timeout === 'string' ? grpcTimeoutMs(timeout) : undefined;
    const call = new Http1Call(req, res, Date.now() + (timeoutMs ?? 0));
    const refuse = (err: ModelmuxError | { code: status; details: string }): void => {
      if (err instanceof ModelmuxError) {
        const g = grpcError(err);
        call.fail(g.code, g.details, g.metadata);
        opts.refused(method, grpcStatus(err.code));
      } else {
        call.fail(err.code, err.details);
        opts.refused(method, err.code);
      }
      // The rest of a body the call will not read: the connection is not reused.
      req.resume();
    };
    if (timeoutMs === undefined) return refuse(new ModelmuxError('invalid_request', `the grpc-timeout header "${String(timeout)}" is malformed`));
    const handler = opts.methods.get(path);
    if (handler === undefined) return refuse({ code: status.UNIMPLEMENTED, details: UNSERVED_METHODS.get(path) ?? `the server does not implement ${path}` });
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > PREFIX_BYTES + opts.maxMessageBytes) return refuse(frameRefusal({ reason: 'too_large', length: declared - PREFIX_BYTES }, opts.maxMessageBytes));
    const reader = new UnaryMessageReader(opts.maxMessageBytes);
    let refused = false;
    req.on('data', (chunk: Buffer) => {
      if (refused) return;
      const s = reader.push(chunk);
      if (s.kind === 'refused') {
        refused = true;
        refuse(frameRefusal(s, opts.maxMessageBytes));
      } else if (s.kind === 'complete') call.message = s.message;
    });
    req.once('end', () => {
      if (refused || call.answered) return;
      if (reader.announced === undefined || call.message.length !== reader.announced) return refuse(new ModelmuxError('invalid_request', 'the call ended before its request message was whole'));
      try {
        handler(call);
      } catch (err) {
        call.fail(status.INTERNAL, `unexpected server error: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
  };
}

/** One call of the form: its request headers and message, and its one answer, written whole. */
class Http1Call implements ServedCall {
  message: Buffer = Buffer.alloc(0);
  answered = false;
  private cancelledFlag = false;
  private listeners: ((why: CancelReason) => void)[] = [];
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    deadlineAt: number,
  ) {
    res.once('close', () => this.cancel(Date.now() >= deadlineAt ? 'deadline' : 'client'));
    if (Number.isFinite(deadlineAt)) {
      // As the gRPC port's sweep: the handler stops waiting, the call is answered DEADLINE_EXCEEDED.
      this.timer = setTimeout(
        () => {
          this.cancel('deadline');
          this.fail(status.DEADLINE_EXCEEDED, 'Deadline exceeded');
        },
        Math.max(0, deadlineAt - Date.now()),
      );
      this.timer.unref();
    }
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

  answer(message: Buffer, headers?: Metadata, trailers?: Metadata): void {
    const body = Buffer.concat([messagePrefix(message.length), message], PREFIX_BYTES + message.length);
    this.write(http1AnswerHeaders(responseHeaders(headers), { ...responseHeaders(trailers), 'grpc-status': String(status.OK) }), body);
  }

  fail(code: status, details: string, metadata?: Metadata, headers?: Metadata): void {
    this.write(http1AnswerHeaders(responseHeaders(headers), { ...responseHeaders(metadata), 'grpc-status': String(code), 'grpc-message': encodeURI(details) }), undefined);
  }

  private write(headers: ReturnType<typeof http1AnswerHeaders>, body: Buffer | undefined): void {
    if (this.answered) return;
    this.answered = true;
    clearTimeout(this.timer);
    const res = this.res;
    if (res.headersSent || res.destroyed) return;
    headers['content-length'] = body === undefined ? 0 : body.length;
    res.writeHead(200, headers);
    res.end(body);
  }

  private cancel(why: CancelReason): void {
    if (this.cancelledFlag || this.answered) return;
    this.cancelledFlag = true;
    clearTimeout(this.timer);
    const listeners = this.listeners;
    this.listeners = [];
    for (const f of listeners) f(why);
  }
}
