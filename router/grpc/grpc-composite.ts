import { Metadata, status as GrpcStatus } from '@grpc/grpc-js';
import { ModelmuxError, toModelmuxError } from '../../common/errors.js';
import { grpcModelMetadata } from '../../common/grpc/grpc-response.js';
import { encodeResponse } from '../../common/grpc/inference-service.js';
import { grpcError, grpcStatusName } from '../../common/grpc/status.js';
import type { UnaryCall } from '../../common/grpc/unary-call.js';
import { parseJsonBody } from '../../common/json-body.js';
import { publicName, type ModelRoute } from '../../common/model-route.js';
import { HEADER_REQUEST_ID } from '../../common/names.js';
import { errorOfAnswer } from '../composite/composite-body.js';
import { MemberRequest } from '../composite/composite-member.js';
import { HEADER_MEMBERS, serveComposite, type CompositeContext } from '../composite/composite-route.js';
import type { DownstreamResponse } from '../http1/downstream.js';
import type { Route } from '../routes/route-table.js';

/** The calls a composite route answers over gRPC, as it answers their HTTP forms. */
export type CompositeMethod = 'ModelInfer' | 'ModelMetadata' | 'ModelReady';

/** What a composite reads of a gRPC call: its whole message, its client, its metadata; and how it is answered. */
export type CompositeCall = Pick<UnaryCall, 'message' | 'client' | 'metadata' | 'onCancel' | 'answer' | 'fail'>;

/**
 * Serves a gRPC call to an ensemble or a sequence route (ADR 0050) as the composite of its HTTP
 * form (composite-route.ts): the call goes in as an in-memory request of that form — the
 * ModelInferRequest message as its body, which the composite's codec reads (typed or raw
 * contents) and answers as a ModelInferResponse (raw to raw, typed to typed) — so it is admitted
 * under the same bounds (`--composite-*`, per client address and in all), its members sent,
 * placed, counted and logged the same way. Its JSON errors become gRPC statuses with their code
 * in the `x-modelmux-error-code` trailer. `requestId`: the call's, accepted or made.
 */
export function serveGrpcComposite(ctx: CompositeContext, call: CompositeCall, method: CompositeMethod, route: Route, modelRoute: ModelRoute, requestId: string): void {
  const name = publicName(modelRoute);
  const base = `${route.prefix}/v2/models/${name}`;
  const headers: string[] = [];
  for (const [key, value] of Object.entries(call.metadata().getMap())) if (typeof value === 'string' && key !== HEADER_REQUEST_ID) headers.push(key, value);
  headers.push(HEADER_REQUEST_ID, requestId);
  const infer = method === 'ModelInfer';
  if (infer) headers.push('content-type', 'application/grpc', 'content-length', String(call.message.length));
  const req = new MemberRequest(infer ? 'POST' : 'GET', method === 'ModelReady' ? `${base}/ready` : infer ? `${base}/infer` : base, headers, call.client);
  const started = ctx.clock.now();
  const res = new GrpcAnswer(requestId, (code) => {
    ctx.metrics.grpcRequests.labels({ route: route.prefix, method, code: grpcStatusName(code) }).inc();
    ctx.metrics.grpcRequestDuration.labels({ route: route.prefix, method }).observe((ctx.clock.now() - started) / 1000);
  });
  res.sent = (status, answerHeaders, body) => {
    const md = new Metadata();
    md.set(HEADER_REQUEST_ID, requestId);
    const members = headerValue(answerHeaders, HEADER_MEMBERS);
    if (members !== undefined) md.set(HEADER_MEMBERS, members);
    try {
      if (status === 200 || (method === 'ModelReady' && status === 503)) call.answer(answerMessage(method, body), md);
      else {
        const e = errorOfAnswer(status, body);
        const g = grpcError(new ModelmuxError(e.code, e.message), md);
        call.fail(g.code, g.details, g.metadata);
        return g.code;
      }
    } catch (err) {
      const g = grpcError(toModelmuxError(err), md);
      call.fail(g.code, g.details, g.metadata);
      return g.code;
    }
    return GrpcStatus.OK;
  };
  call.onCancel(() => res.cancel());
  serveComposite(ctx, req, res, { route, modelRoute, grpc: infer });
  req.deliver(infer ? call.message : null);
}

/** The message of a composite's 200 answer: ModelInfer's is written already; metadata and readiness are JSON. */
function answerMessage(method: CompositeMethod, body: Buffer): Buffer {
  if (method === 'ModelInfer') return body;
  const json = parseJsonBody(body) as { ready?: unknown };
  return method === 'ModelReady' ? encodeResponse('ModelReady', { ready: json.ready === true }) : encodeResponse('ModelMetadata', grpcModelMetadata(json));
}

function headerValue(headers: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < headers.length; i += 2) if (headers[i] === name) return headers[i + 1];
  return undefined;
}

/** The composite's answer, held whole in memory (it writes it at once), then sent as the call's. */
class GrpcAnswer implements DownstreamResponse {
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  /** Answers the call from the composite's status, headers and body; returns the gRPC status sent. */
  sent: (status: number, headers: string[], body: Buffer) => GrpcStatus = () => GrpcStatus.INTERNAL;
  private status = 0;
  private headers: string[] = [];
  private readonly chunks: Buffer[] = [];
  private readonly closeListeners: (() => void)[] = [];

  constructor(
    private readonly requestId: string,
    private readonly counted: (code: GrpcStatus) => void,
  ) {}

  setHeader(): this {
    return this;
  }

  writeHead(status: number, headers: string[]): this {
    this.headersSent = true;
    this.status = status;
    this.headers = headers;
    return this;
  }

  write(chunk: Buffer): boolean {
    if (!this.destroyed) this.chunks.push(chunk);
    return true;
  }

  end(data?: string): this {
    if (this.destroyed || this.writableFinished) return this;
    if (data !== undefined && data.length > 0) this.chunks.push(Buffer.from(data));
    this.writableFinished = true;
    this.counted(this.sent(this.status, this.headers, Buffer.concat(this.chunks)));
    this.chunks.length = 0;
    this.close();
    return this;
  }

  /** The composite cut its answer: never after it wrote it whole, which it does at once; a guard. */
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    if (!this.writableFinished) this.counted(this.sent(500, [], Buffer.from(JSON.stringify({ error: 'internal', message: 'the composite answer broke off', requestId: this.requestId }))));
    this.close();
    return this;
  }

  on(_event: 'close', listener: () => void): this {
    this.closeListeners.push(listener);
    return this;
  }

  /** The client cancelled the call (or its deadline passed; the server answers it): the composite stops, its answer unsent. */
  cancel(): void {
    if (this.writableFinished || this.destroyed) return;
    this.destroyed = true;
    this.counted(GrpcStatus.CANCELLED);
    this.close();
  }

  private close(): void {
    for (const l of this.closeListeners.splice(0)) l();
  }
}
