import { status as GrpcStatus } from '@grpc/grpc-js';
import { ModelmuxError, toModelmuxError } from '../../common/errors.js';
import { grpcModelMetadata } from '../../common/grpc/grpc-response.js';
import { encodeResponse } from '../../common/grpc/inference-service.js';
import { grpcError, grpcStatusName, type CallMetadata } from '../../common/grpc/status.js';
import type { UnaryCall } from '../../common/grpc/unary-call.js';
import { parseJsonBody } from '../../common/json-body.js';
import { publicName, type ModelRoute } from '../../common/model-route.js';
import { HEADER_REQUEST_ID } from '../../common/names.js';
import { errorOfAnswer } from '../composite/composite-body.js';
import { MemberRequest, MemberResponse, type AnswerBytes, type MemberAnswer } from '../composite/composite-member.js';
import { HEADER_MEMBERS, serveComposite, type CompositeContext } from '../composite/composite-route.js';
import { rawHeaderValue } from '../routes/route-rewrite.js';
import type { Route } from '../routes/route-table.js';

/** The calls a composite route answers over gRPC, as it answers their HTTP forms. */
export type CompositeMethod = 'ModelInfer' | 'ModelMetadata' | 'ModelReady';

/** What a composite reads of a gRPC call: its whole message, its client, its metadata; and how it is answered. */
export type CompositeCall = Pick<UnaryCall, 'message' | 'client' | 'textMetadata' | 'onCancel' | 'answer' | 'fail'>;

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
  const metadata = call.textMetadata();
  const headers: string[] = [];
  for (let i = 0; i < metadata.length; i += 2) if (metadata[i] !== HEADER_REQUEST_ID) headers.push(metadata[i] as string, metadata[i + 1] as string);
  headers.push(HEADER_REQUEST_ID, requestId);
  const infer = method === 'ModelInfer';
  if (infer) headers.push('content-type', 'application/grpc', 'content-length', String(call.message.length));
  const req = new MemberRequest(infer ? 'POST' : 'GET', method === 'ModelReady' ? `${base}/ready` : infer ? `${base}/infer` : base, headers, call.client);
  const started = ctx.clock.now();
  const counted = (code: GrpcStatus): void => {
    ctx.metrics.grpcRequests.labels({ route: route.prefix, method, code: grpcStatusName(code) }).inc();
    ctx.metrics.grpcRequestDuration.labels({ route: route.prefix, method }).observe((ctx.clock.now() - started) / 1000);
  };
  // The composite holds and counts its answer's bytes itself; it writes it whole, at once.
  const res = new MemberResponse(Number.POSITIVE_INFINITY, UNCOUNTED, (a) => counted(answerCall(call, method, requestId, a)));
  call.onCancel(() => {
    res.cancel();
    counted(GrpcStatus.CANCELLED);
  });
  serveComposite(ctx, req, res, { route, modelRoute, grpc: infer });
  req.deliver(infer ? call.message : null);
}

const UNCOUNTED: AnswerBytes = { take: () => undefined, release: () => undefined };

/** Answers the call from the composite's answer; returns the gRPC status sent. */
function answerCall(call: CompositeCall, method: CompositeMethod, requestId: string, a: MemberAnswer): GrpcStatus {
  const md: CallMetadata = { [HEADER_REQUEST_ID]: requestId };
  try {
    if (!a.ok) throw a.error;
    const members = rawHeaderValue(a.headers, HEADER_MEMBERS);
    if (members !== undefined) md[HEADER_MEMBERS] = members;
    if (a.status !== 200 && !(method === 'ModelReady' && a.status === 503)) {
      const e = errorOfAnswer(a.status, a.body);
      throw new ModelmuxError(e.code, e.message);
    }
    call.answer(answerMessage(method, a.body), md);
    return GrpcStatus.OK;
  } catch (err) {
    const g = grpcError(toModelmuxError(err), md);
    call.fail(g.code, g.details, g.metadata);
    return g.code;
  }
}

/** The message of a composite's 200 answer: ModelInfer's is written already; metadata and readiness are JSON. */
function answerMessage(method: CompositeMethod, body: Buffer): Buffer {
  if (method === 'ModelInfer') return body;
  const json = parseJsonBody(body) as { ready?: unknown };
  return method === 'ModelReady' ? encodeResponse('ModelReady', { ready: json.ready === true }) : encodeResponse('ModelMetadata', grpcModelMetadata(json));
}
