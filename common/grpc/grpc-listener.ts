import { createServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { ServerCredentials, type ConnectionInjector, type Server } from '@grpc/grpc-js';

/**
 * Decides whether an accepted connection is served, `open` being how many the listener holds
 * (this one not counted); a refused one is closed at once, before any HTTP/2 frame.
 */
export type AdmitConnection = (socket: Socket, open: number) => boolean;

/**
 * The TCP side of a grpc-js server, for router and replica alike: the connections are accepted
 * here and handed to grpc-js (its connection injector) instead of `bindAsync`, so that they send
 * without Nagle's delay, which grpc-js does not turn off on a server's sockets and which, with
 * delayed ACKs, held a small answer tens of milliseconds; and so that a caller can count and
 * refuse them (`admit`). The server's options (limits, keepalive, interceptors) apply to them as
 * to bound ones.
 */
export class GrpcListener {
  private readonly injector: ConnectionInjector;
  private readonly listener: NetServer;
  private readonly sockets = new Set<Socket>();

  constructor(server: Server, admit: AdmitConnection = () => true) {
    this.injector = server.createConnectionInjector(ServerCredentials.createInsecure());
    this.listener = createServer({ noDelay: true }, (socket) => {
      if (!admit(socket, this.sockets.size)) {
        socket.destroy();
        return;
      }
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      this.injector.injectConnection(socket);
    });
  }

  /** Listens on `host:port` (0: a free port); resolves to the bound port. */
  async listen(port: number, host: string): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      const failed = (err: Error): void => {
        const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
        reject(new Error(`cannot serve gRPC on ${address} (--grpc-port): ${err.message}`, { cause: err }));
      };
      this.listener.once('error', failed);
      this.listener.listen(port, host, () => {
        this.listener.off('error', failed);
        resolve();
      });
    });
    return (this.listener.address() as AddressInfo).port;
  }

  /** Takes no new connections, sends the open ones GOAWAY and waits for their calls, at most `graceMs`; then cuts the rest. */
  async drain(graceMs: number): Promise<void> {
    this.listener.close();
    this.injector.drain(graceMs);
    const deadline = Date.now() + graceMs;
    while (this.sockets.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    this.injector.destroy();
    for (const s of this.sockets) s.destroy();
  }
}
