import { ModelmuxError } from '../../common/errors.js';
import { idSegment } from '../../common/model-id.js';
import { HEADER_REQUEST_ID } from '../../common/names.js';
import { MODEL_HEADERS } from '../../common/request-grammar.js';
import type { CompositeTicket } from './composite-admission.js';
import type { DownstreamRequest, DownstreamResponse } from '../http1/downstream.js';
import type { MemberSlots } from './member-slots.js';
import type { RequestSender } from '../exchange/request-sender.js';

/** A member's (or a step's) whole answer, or why there is none. */
export type MemberAnswer = { ok: true; status: number; headers: readonly string[]; body: Buffer } | { ok: false; error: ModelmuxError };

/**
 * The bounds of one client's composite request, shared by every composite it passes through
 * (an ensemble of ensembles is one client request): its member requests, its client's share of
 * bytes, and how to end it when one of those bounds bites at any level.
 */
export interface CompositeScope {
  readonly slots: MemberSlots;
  readonly ticket: CompositeTicket;
  /** Ends the client's request with `err`, whichever composite of it found that a bound bites. */
  fail(err: ModelmuxError): void;
  /** Whether the client's request has ended. */
  ended(): boolean;
}

/** Counts the bytes of a member's answer as they arrive; refuses those its composite may not hold. */
export interface AnswerBytes {
  take(n: number): ModelmuxError | undefined;
  release(n: number): void;
}

/** What a member request brings a member that is an ensemble or a sequence itself. */
export interface CompositeParent {
  scope: CompositeScope;
  /** The request's body, in memory already: a member that is a composite itself neither reads nor counts it again. */
  body: Buffer | null;
  /** Gives back the member's place among those under way: a composite holds no replica slot. */
  releaseSlot(): void;
}

/** One request a composite route sends for one of its models. */
export interface MemberCall {
  /** The route prefix the composite was asked on: members are models of the same pool. */
  prefix: string;
  model: string;
  /** POST `…/infer` with `body`, or GET the model's metadata or readiness. */
  action: 'infer' | 'metadata' | 'ready';
  body: Buffer | null;
  requestId: string;
  /** The client's headers (flat `[name, value, …]`) passed on: a split member's sticky header, x-forwarded-for… */
  clientHeaders: readonly string[];
  remoteAddress: string | undefined;
  /** Passed on to the member should it be a composite itself. */
  parent: Omit<CompositeParent, 'body'>;
  answerBytes: AnswerBytes;
}

/** Headers of the client's request a member request must not inherit: its model, its body's framing and encodings (the router reads the answer), its id. */
const NOT_INHERITED: ReadonlySet<string> = new Set([
  ...MODEL_HEADERS,
  'content-length',
  'content-type',
  'transfer-encoding',
  'content-encoding',
  'accept-encoding',
  'expect',
  HEADER_REQUEST_ID,
  'inference-header-content-length',
]);

/**
 * Sends one member request through the router (`send`: the dispatcher's), as a request from a
 * client would go: the same classification, route lookup, placement, retries, try timeouts,
 * byte budget, metrics and access-log line (ADR 0035). The router reads an in-memory request and
 * writes into an in-memory response (`maxAnswerBytes`: --max-response-buffer-bytes); `done` gets the answer once, whole, held up to
 * `--max-response-buffer-bytes` and counted by `answerBytes` as it arrives: an answer given to
 * `done` stays counted (its composite holds it parsed, and gives the bytes back when it ends),
 * one that failed or was cancelled is given back at once. The returned function cancels: the
 * exchange sees its client go away, so it stops waiting or aborts its upstream request, and
 * `done` is not called.
 */
export function sendMember(send: RequestSender, maxAnswerBytes: number, call: MemberCall, done: (a: MemberAnswer) => void): () => void {
  const path = `${call.prefix}/v2/models/${idSegment(call.model)}${call.action === 'metadata' ? '' : `/${call.action}`}`;
  const headers: string[] = [];
  for (let i = 0; i + 1 < call.clientHeaders.length; i += 2) {
    const name = call.clientHeaders[i] as string;
    if (!NOT_INHERITED.has(name.toLowerCase())) headers.push(name, call.clientHeaders[i + 1] as string);
  }
  headers.push(HEADER_REQUEST_ID, call.requestId);
  if (call.body !== null) headers.push('content-type', 'application/json', 'content-length', String(call.body.length));
  const req = new MemberRequest(call.action === 'infer' ? 'POST' : 'GET', path, headers, call.remoteAddress, { ...call.parent, body: call.body });
  const res = new MemberResponse(maxAnswerBytes, call.answerBytes, done);
  send(req, res);
  req.deliver(call.body);
  return () => res.cancel();
}

type Listener = (() => void) | ((chunk: Buffer) => void);

/** An in-memory client request sent through the router: a member's, and a split route's mirror copy (route-mirror.ts). */
export class MemberRequest implements DownstreamRequest {
  private readonly data: ((chunk: Buffer) => void)[] = [];
  private readonly end: (() => void)[] = [];
  readonly socket: DownstreamRequest['socket'];

  constructor(
    readonly method: string,
    readonly url: string,
    readonly rawHeaders: string[],
    remoteAddress: string | undefined,
    /** Set when a composite sends it: a member that is a composite too takes its bounds and its body from it. */
    readonly composite: CompositeParent | undefined = undefined,
  ) {
    // The answer is written to memory and never waits for a drain.
    this.socket = { remoteAddress, once: () => undefined, removeListener: () => undefined };
  }

  on(event: 'data' | 'end', listener: Listener): this {
    if (event === 'data') this.data.push(listener);
    else this.end.push(listener as () => void);
    return this;
  }

  deliver(body: Buffer | null): void {
    if (body !== null && body.length > 0) for (const l of this.data) l(body);
    for (const l of this.end) l();
  }
}

/**
 * An in-memory response the router writes a request's answer into: a member's, or a gRPC call's
 * composite answer (router/grpc/grpc-composite.ts).
 */
export class MemberResponse implements DownstreamResponse {
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  private status = 0;
  private headers: readonly string[] = [];
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly closeListeners: (() => void)[] = [];
  private settled = false;

  constructor(
    private readonly limit: number,
    private readonly bytes: AnswerBytes,
    private readonly done: (a: MemberAnswer) => void,
  ) {}

  setHeader(): this {
    return this;
  }

  writeHead(status: number, headers: readonly string[] = []): this {
    if (this.destroyed) return this;
    this.headersSent = true;
    this.status = status;
    this.headers = headers;
    return this;
  }

  write(chunk: Buffer): boolean {
    if (this.destroyed) return true;
    if (this.size + chunk.length > this.limit) {
      this.abort(new ModelmuxError('upstream_unavailable', `the answer is larger than ${this.limit} bytes, the most the router holds of one answer (--max-response-buffer-bytes)`));
      return true;
    }
    const refused = this.bytes.take(chunk.length);
    if (refused !== undefined) this.abort(refused);
    else {
      this.size += chunk.length;
      this.chunks.push(chunk);
    }
    return true;
  }

  end(data?: string): this {
    if (this.destroyed || this.writableFinished) return this;
    if (data !== undefined && data.length > 0) this.write(Buffer.from(data));
    if (this.destroyed) return this;
    this.writableFinished = true;
    const body = Buffer.concat(this.chunks, this.size);
    this.chunks.length = 0;
    this.settle({ ok: true, status: this.status, headers: this.headers, body });
    this.close();
    return this;
  }

  /** The exchange cut the answer after it began (its replica broke off). */
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.settle({ ok: false, error: new ModelmuxError('upstream_unavailable', 'the replica broke off its answer') });
    this.close();
    return this;
  }

  on(_event: 'close', listener: () => void): this {
    this.closeListeners.push(listener);
    return this;
  }

  /** The composite no longer wants the answer. */
  cancel(): void {
    this.settled = true;
    this.releaseBytes();
    this.destroy();
  }

  private abort(error: ModelmuxError): void {
    this.settle({ ok: false, error });
    this.destroy();
  }

  private settle(a: MemberAnswer): void {
    if (this.settled) return;
    this.settled = true;
    // An answer handed over stays counted until its composite ends.
    if (a.ok) this.size = 0;
    try {
      this.done(a);
    } finally {
      this.releaseBytes();
    }
  }

  private releaseBytes(): void {
    this.bytes.release(this.size);
    this.size = 0;
  }

  private close(): void {
    for (const l of this.closeListeners.splice(0)) l();
  }
}
