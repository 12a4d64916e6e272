import type { Socket } from 'node:net';
import { Server, type sendUnaryData, type ServerUnaryCall, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { GrpcListener } from '../common/grpc/grpc-listener.js';
import { inferenceServiceDefinition } from '../common/grpc/inference-service.js';
import type { Logger } from '../common/log.js';
import { refusal } from './client-connections.js';
import { GrpcExchange, type ForwardedMethod, type GrpcContext } from './grpc-exchange.js';
import { passThrough, readForwarded, type ForwardedMessage } from './grpc-head.js';
import { messageTimeout } from './grpc-message-timeout.js';
import { grpcServerOptions, type GrpcLimits } from './grpc-options.js';

const FORWARDED: readonly ForwardedMethod[] = ['ModelInfer', 'ModelMetadata', 'ModelReady', 'ServerMetadata'];

/**
 * The router's gRPC port: the Open Inference Protocol's `inference.GRPCInferenceService` on
 * grpc-js (HTTP/2). ModelInfer, ModelMetadata, ModelReady and ServerMetadata are placed and
 * forwarded to a replica as HTTP requests are (grpc-exchange.ts): their messages are read only
 * as far as the model name and version (grpc-head.ts) and sent on as the bytes that came, the
 * answers likewise. ServerLive and ServerReady are the router's own, as /healthz and /readyz.
 *
 * Its connections are accepted by a `GrpcListener` (without Nagle's delay) and counted against
 * --max-connections and --max-connections-per-client as HTTP's are (a connection past them is
 * closed at once).
 */
export class RouterGrpcServer {
  private readonly server: Server;
  private readonly listener: GrpcListener;
  private readonly byClient = new Map<string, number>();

  constructor(
    ctx: GrpcContext,
    limits: GrpcLimits,
    private readonly connections: { maxConnections: number; maxConnectionsPerClient: number },
    isReady: () => boolean,
    private readonly log: Logger,
  ) {
    const { proxy } = ctx;
    const timeout = messageTimeout(proxy.deadlines, proxy.clock, proxy.limits.bodyTimeoutMs, () => proxy.metrics.timedOut('body_total'));
    this.server = new Server({ ...grpcServerOptions(limits), interceptors: [timeout] });
    const base = inferenceServiceDefinition();
    const service: Record<string, ServiceDefinition[string]> = { ...base };
    const impl: UntypedServiceImplementation = {
      ServerLive: (_call: ServerUnaryCall<unknown, unknown>, done: sendUnaryData<unknown>) => done(null, { live: true }),
      ServerReady: (_call: ServerUnaryCall<unknown, unknown>, done: sendUnaryData<unknown>) => done(null, { ready: isReady() }),
    };
    for (const method of FORWARDED) {
      const def = base[method];
      if (def === undefined) throw new Error(`the inference service has no ${method}`);
      service[method] = { ...def, requestDeserialize: readForwarded, responseSerialize: passThrough };
      impl[method] = (call: ServerUnaryCall<ForwardedMessage, Buffer>, done: sendUnaryData<Buffer>) => {
        try {
          new GrpcExchange(ctx, method, call, done).start();
        } catch (err) {
          // The exchange answers its own failures; this is the last guard of the process.
          this.log.error('unhandled gRPC call error', { method, reason: err instanceof Error ? err.message : String(err) });
        }
      };
    }
    this.server.addService(service, impl);
    const rejected = proxy.metrics.rejected.bind(proxy.metrics);
    this.listener = new GrpcListener(this.server, (socket, open) => this.admit(socket, open, rejected));
  }

  private admit(socket: Socket, open: number, rejected: (reason: 'connections' | 'client_connections') => void): boolean {
    const client = socket.remoteAddress ?? '';
    const fromClient = this.byClient.get(client) ?? 0;
    const refused = refusal(open, fromClient, this.connections);
    if (refused !== undefined) {
      // Before any HTTP/2 frame: there is no call to answer a status on, only the connection to close.
      rejected(refused);
      return false;
    }
    this.byClient.set(client, fromClient + 1);
    socket.once('close', () => {
      const left = (this.byClient.get(client) ?? 1) - 1;
      if (left === 0) this.byClient.delete(client);
      else this.byClient.set(client, left);
    });
    return true;
  }

  /** Listens on `host:port` (0: a free port); resolves to the bound port. */
  listen(port: number, host: string): Promise<number> {
    return this.listener.listen(port, host);
  }

  /** Takes no new connections, sends the open ones GOAWAY and waits for their calls, at most `graceMs`. */
  drain(graceMs: number): Promise<void> {
    return this.listener.drain(graceMs);
  }
}
