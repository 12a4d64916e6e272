import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { ModelmuxError, toModelmuxError } from '../../common/errors.js';
import { decodeRequest, encodeResponse, type InferenceMethod, type ModelInferRequest, type ResponseOf } from '../../common/grpc/inference-service.js';
import { grpcError, type CallMetadata } from '../../common/grpc/status.js';
import { GRPC_SERVICE_PATH } from '../../common/grpc/grpc-http1-form.js';
import type { ServedCall, ServedHandler } from '../../common/grpc/unary-call.js';
import type { Logger } from '../../common/log.js';
import type { ModelId } from '../../common/model-id.js';
import { HEADER_CACHE, HEADER_REPLICA, HEADER_REQUEST_ID, HEADER_TABLE_VERSION } from '../../common/names.js';
import { acceptedRequestId } from '../../common/request-id.js';
import { versionedModel } from '../../common/request-grammar.js';
import { grpcInferBody } from '../../common/grpc/grpc-request.js';
import { grpcInferResponse, grpcModelMetadata } from '../../common/grpc/grpc-response.js';
import type { ReplicaMetrics } from '../metrics.js';
import { HEADER_TEST_DELAY } from '../http/server.js';
import type { ServingBackend } from '../serving/serving-backend.js';

/**
 * The replica's gRPC service (inference.GRPCInferenceService, docs/grpc.md) beside its HTTP API:
 * the same inference path, the same admission (one count of ongoing requests for both), the
 * same error codes as gRPC statuses. Nothing escapes a handler: every failure is a status.
 */

export interface GrpcServerOptions {
  service: ServingBackend;
  metrics: ReplicaMetrics;
  log: Logger;
  /** Shared with the HTTP API: draining, and the requests in progress over both. */
  state: { shuttingDown: boolean; ongoing: number };
  replicaName: () => string;
  maxOngoingRequests: number;
  testHooks: boolean;
  onServed: () => void;
  /** False in sidecar mode: raw contents reach the runtime as JSON data (grpc-request.ts). */
  binaryInputs: boolean;
}

/** A call's context: its request id, and the metadata sent with its answer or error. */
interface CallContext {
  requestId: string;
  trailers: CallMetadata;
  /** Resolves when the client cancels or its deadline passes. */
  cancelled: Promise<void>;
}

/** The handlers of the replica's gRPC service, by path, for a UnaryServer (common/grpc/unary-server.ts). */
export function grpcMethods(opts: GrpcServerOptions): Map<string, ServedHandler> {
  const { service, metrics, log, state } = opts;

  const context = (call: ServedCall): CallContext => {
    const given = call.metadataValue(HEADER_REQUEST_ID);
    const requestId = acceptedRequestId(given) ?? randomUUID();
    const trailers: CallMetadata = { [HEADER_REQUEST_ID]: requestId, [HEADER_REPLICA]: opts.replicaName() };
    const cancelled = new Promise<void>((resolve) => {
      if (call.cancelled) resolve();
      else call.onCancel(() => resolve());
    });
    return { requestId, trailers, cancelled };
  };

  /** Answers `work`'s result, or its error as a status; stops waiting when the call is cancelled. */
  const answer = async <M extends InferenceMethod>(method: M, ctx: CallContext, call: ServedCall, work: () => Promise<ResponseOf[M]>): Promise<string> => {
    try {
      const result = await Promise.race([work(), ctx.cancelled.then(() => undefined)]);
      if (result === undefined) return status[status.CANCELLED];
      ctx.trailers[HEADER_TABLE_VERSION] = String(service.cache.version);
      call.answer(encodeResponse(method, result), undefined, ctx.trailers);
      return status[status.OK];
    } catch (err) {
      const e = toModelmuxError(err);
      if (e.code === 'internal') log.error('unexpected error', { requestId: ctx.requestId, method, reason: err instanceof Error ? (err.stack ?? err.message) : String(err) });
      const g = grpcError(e, ctx.trailers);
      call.fail(g.code, g.details, g.metadata);
      return status[g.code];
    }
  };

  /** The handler of `method`; `admitted` calls count against maxOngoingRequests like HTTP inference. */
  const unary =
    <Q, M extends InferenceMethod>(method: M, admitted: boolean, work: (req: Q, ctx: CallContext, call: ServedCall) => Promise<ResponseOf[M]>): ServedHandler =>
    (call) => {
      const startedAt = performance.now();
      const ctx = context(call);
      const done = (code: string): void => {
        metrics.grpcRequests.inc({ method, code });
        if (admitted) metrics.grpcRequestDuration.observe({ method }, (performance.now() - startedAt) / 1000);
      };
      // Decoded before admission, as an HTTP body is read before it: a bad message costs no slot.
      let request: Q;
      try {
        request = decodeRequest<Q>(method, call.message);
      } catch (err) {
        // Thrown as decoding threw it, so that `answer` logs an unexpected error with its own stack.
        const fail = (): Promise<never> => {
          throw err;
        };
        void answer(method, ctx, call, fail).then(done);
        return;
      }
      const run = (): Promise<ResponseOf[M]> => work(request, ctx, call);
      if (!admitted) {
        void answer(method, ctx, call, run).then(done);
        return;
      }
      const refusal = state.shuttingDown
        ? new ModelmuxError('shutting_down', 'the replica is shutting down')
        : state.ongoing >= opts.maxOngoingRequests
          ? new ModelmuxError('overloaded', `the replica is at its limit of ${opts.maxOngoingRequests} ongoing requests`)
          : undefined;
      if (refusal !== undefined) {
        if (refusal.code === 'overloaded') metrics.rejected.inc();
        void answer(method, ctx, call, () => Promise.reject(refusal)).then(done);
        return;
      }
      state.ongoing++;
      metrics.ongoing.set(state.ongoing);
      void answer(method, ctx, call, run).then((code) => {
        state.ongoing--;
        metrics.ongoing.set(state.ongoing);
        done(code);
      });
    };

  const modelOf = (name: string, version: string): ModelId => versionedModel(name, version === '' ? undefined : version);

  const holdMs = (call: ServedCall): number => {
    if (!opts.testHooks) return 0;
    return Math.max(0, Math.min(600_000, Number(call.metadataValue(HEADER_TEST_DELAY) ?? 0) || 0));
  };

  const handlers: Record<InferenceMethod, ServedHandler> = {
    ServerLive: unary('ServerLive', false, () => Promise.resolve({ live: true })),
    ServerReady: unary('ServerReady', false, () => Promise.resolve({ ready: !state.shuttingDown && service.ready() })),
    // Neither HTTP extension (binary tensor data, model repository) is a part of the gRPC service.
    ServerMetadata: unary('ServerMetadata', false, () => Promise.resolve({ name: 'modelmux-replica', version: '1', extensions: [] })),
    ModelReady: unary('ModelReady', false, (req: { name: string; version: string }) => Promise.resolve({ ready: service.cache.has(modelOf(req.name, req.version)) })),
    ModelMetadata: unary('ModelMetadata', true, async (req: { name: string; version: string }, ctx) => {
      const { body, hit } = await service.metadata(modelOf(req.name, req.version));
      ctx.trailers[HEADER_CACHE] = hit ? 'hit' : 'miss';
      return grpcModelMetadata(body);
    }),
    ModelInfer: unary('ModelInfer', true, async (req: ModelInferRequest, ctx, call) => {
      const id = modelOf(req.model_name, req.model_version ?? '');
      const { body, binary, raw } = grpcInferBody(req, opts.binaryInputs);
      const outcome = await service.infer(id, body, binary, holdMs(call));
      opts.onServed();
      ctx.trailers[HEADER_CACHE] = outcome.hit ? 'hit' : 'miss';
      return grpcInferResponse(outcome.body, id, raw);
    }),
  };
  return new Map(Object.entries(handlers).map(([method, handler]) => [`${GRPC_SERVICE_PATH}${method}`, handler]));
}
