import { status } from '@grpc/grpc-js';
import { encodeResponse, type ResponseOf } from '../../common/grpc/inference-service.js';
import { grpcStatusName } from '../../common/grpc/status.js';
import type { UnaryCall } from '../../common/grpc/unary-call.js';
import { UnaryServer, type UnaryHandler } from '../../common/grpc/unary-server.js';
import type { Logger } from '../../common/log.js';
import { GrpcExchange, type ForwardedMethod, type GrpcContext } from './grpc-exchange.js';
import { grpcServerLimits, type GrpcFlags } from './grpc-options.js';

const SERVICE_PATH = '/inference.GRPCInferenceService/';
const FORWARDED: readonly ForwardedMethod[] = ['ModelInfer', 'ModelMetadata', 'ModelReady', 'ServerMetadata'];

/**
 * The router's gRPC port: the Open Inference Protocol's `inference.GRPCInferenceService` on the
 * project's unary gRPC server over node:http2 (common/grpc/unary-server.ts, ADR 0039), whose
 * bounds are HTTP's under the same flags, its messages and held answers in the same byte budget.
 * ModelInfer, ModelMetadata, ModelReady and ServerMetadata are placed and forwarded to a replica
 * as HTTP requests are (grpc-exchange.ts): their messages are checked and read as far as the
 * model name and version (common/grpc/message-scan.ts) and sent on as the bytes that came, the
 * answers likewise. ServerLive and ServerReady are the router's own, as /healthz and /readyz.
 */
export class RouterGrpcServer {
  private readonly server: UnaryServer;

  constructor(ctx: GrpcContext, flags: GrpcFlags, isReady: () => boolean, log: Logger) {
    const { router } = ctx;
    const own =
      <M extends 'ServerLive' | 'ServerReady'>(method: M, value: () => ResponseOf[M]): UnaryHandler =>
      (call) =>
        call.answer(encodeResponse(method, value()));
    const methods = new Map<string, UnaryHandler>([
      [`${SERVICE_PATH}ServerLive`, own('ServerLive', () => ({ live: true }))],
      [`${SERVICE_PATH}ServerReady`, own('ServerReady', () => ({ ready: isReady() }))],
    ]);
    for (const method of FORWARDED) {
      methods.set(`${SERVICE_PATH}${method}`, (call: UnaryCall) => {
        try {
          new GrpcExchange(ctx, method, call).start();
        } catch (err) {
          // The exchange answers its own failures; this is the last guard of the process.
          log.error('unhandled gRPC call error', { method, reason: err instanceof Error ? err.message : String(err) });
          call.fail(status.INTERNAL, 'unexpected router error');
        }
      });
    }
    this.server = new UnaryServer({
      methods,
      limits: grpcServerLimits(flags),
      budget: router.buffered,
      portFlag: '--grpc-port',
      framing: flags.grpcFraming,
      events: {
        refused: (reason, client) => {
          if (reason !== 'resets') return router.metrics.rejected(reason);
          router.metrics.rejected('resets');
          log.warn('gRPC client over its reset budget; its connections are closed', { client, maxResets: flags.grpcMaxResetsPerClient });
        },
        timedOut: (phase) => router.metrics.timedOut(phase === 'write' ? 'downstream_write' : phase === 'message_idle' ? 'body_idle' : 'body_total'),
        callRefused: (method, code, err) => {
          if (err?.code === 'buffer_full') router.metrics.rejected('buffered_bytes');
          router.metrics.grpcRequests.labels({ route: 'none', method, code: grpcStatusName(code) }).inc();
        },
      },
    });
  }

  get connections(): number {
    return this.server.connections;
  }

  /** Listens on `host:port` (0: a free port); resolves to the bound port. */
  listen(port: number, host: string): Promise<number> {
    return this.server.listen(port, host);
  }

  /** Takes no new connections, sends the open ones GOAWAY and waits for their calls, at most `graceMs`. */
  drain(graceMs: number): Promise<void> {
    return this.server.drain(graceMs);
  }
}
