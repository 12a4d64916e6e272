import { createServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { Server, ServerCredentials, type ConnectionInjector, type sendUnaryData, type ServerUnaryCall, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
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
 * The router accepts the connections itself and hands them to grpc-js (its connection
 * injector): so that they are counted against --max-connections and --max-connections-per-client
 * as HTTP's are (a connection past them is closed at once), and so that they send without
 * Nagle's delay, which grpc-js does not turn off on a server's sockets and which, with delayed
 * ACKs, held a call's answer tens of milliseconds.
 */
export class RouterGrpcServer {
  private readonly server: Server;
  private readonly injector: ConnectionInjector;
  private readonly listener: NetServer;
  private readonly sockets = new Set<Socket>();
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
    this.injector = this.server.createConnectionInjector(ServerCredentials.createInsecure());
    this.listener = createServer({ noDelay: true }, (socket) => this.accept(socket, proxy.metrics.rejected.bind(proxy.metrics)));
  }

  private accept(socket: Socket, rejected: (reason: 'connections' | 'client_connections') => void): void {
    const client = socket.remoteAddress ?? '';
    const fromClient = this.byClient.get(client) ?? 0;
    const refused = refusal(this.sockets.size, fromClient, this.connections);
    if (refused !== undefined) {
      // Before any HTTP/2 frame: there is no call to answer a status on, only the connection to close.
      rejected(refused);
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    this.byClient.set(client, fromClient + 1);
    socket.once('close', () => {
      this.sockets.delete(socket);
      const left = (this.byClient.get(client) ?? 1) - 1;
      if (left === 0) this.byClient.delete(client);
      else this.byClient.set(client, left);
    });
    this.injector.injectConnection(socket);
  }

  /** Listens on `host:port` (0: a free port); resolves to the bound port. */
  async listen(port: number, host: string): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.listener.once('error', reject);
      this.listener.listen(port, host, () => {
        this.listener.off('error', reject);
        resolve();
      });
    });
    return (this.listener.address() as AddressInfo).port;
  }

  /** Takes no new connections, sends the open ones GOAWAY and waits for their calls, at most `graceMs`. */
  async drain(graceMs: number): Promise<void> {
    this.listener.close();
    this.injector.drain(graceMs);
    const deadline = Date.now() + graceMs;
    while (this.sockets.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    this.injector.destroy();
    for (const s of this.sockets) s.destroy();
  }
}
