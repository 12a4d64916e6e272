import { Agent, createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { isGrpcHttp1Request } from '../../common/grpc/grpc-http1-form.js';
import type { Faults } from './grpc-fault-relay.js';

/** The headers of one call of the gRPC form a relay received. */
export interface RelayedFormCall {
  headers: IncomingHttpHeaders;
  at: number;
}

/**
 * A real replica's HTTP port behind a relay (node:http server and client) that misbehaves on cue
 * for the router's HTTP/1.1 form of gRPC calls (ADR 0054), as test/helpers/grpc-fault-relay.ts
 * does for the HTTP/2 upstream; every other request (discovery's, the HTTP API's) is relayed as
 * it is. What a fault does to the next call of the form:
 * - reset: closes the connection before any answer, after `delayMs`;
 * - break: relays the answer's head and its first bytes, then closes the connection;
 * - stall: relays the answer's head and its first bytes, then nothing more.
 * `older` makes the relay's replica one of an older version: it gets the form with another
 * content type, so its own HTTP API answers it (404).
 */
export class Http1FaultRelay {
  readonly calls: RelayedFormCall[] = [];
  older = false;
  private readonly agent = new Agent({ keepAlive: true });
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly target: string,
    private readonly faults: Faults,
  ) {}

  static async start(target: string, faults: Faults): Promise<Http1FaultRelay> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const relay = new Http1FaultRelay(server, (server.address() as AddressInfo).port, target, faults);
    server.on('connection', (s) => {
      relay.sockets.add(s);
      s.once('close', () => relay.sockets.delete(s));
    });
    server.on('request', (req, res) => relay.onRequest(req, res));
    return relay;
  }

  /** The relay's address as a route's replica URL, its gRPC port the replica's own. */
  url(grpcPort: number): string {
    return `http://127.0.0.1:${this.port}?grpc-port=${grpcPort}`;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const form = isGrpcHttp1Request(req.method, req.url, req.headers['content-type']);
    if (form) this.calls.push({ headers: req.headers, at: Date.now() });
    const fault = form ? this.faults.take() : 'pass';
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.once('end', () => {
      if (fault === 'reset') return void setTimeout(() => req.socket.destroy(), this.faults.delayMs);
      const headers = { ...req.headers };
      if (form && this.older) headers['content-type'] = 'application/octet-stream';
      const up = request(`http://${this.target}${req.url ?? '/'}`, { method: req.method, headers, agent: this.agent }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        let sent = 0;
        answer.on('data', (c: Buffer) => {
          if (fault === 'pass') return void res.write(c);
          if (sent > 0) return;
          // The prefix and a few bytes of the message: the answer has begun.
          sent = Math.min(c.length, 8);
          res.write(c.subarray(0, sent));
          if (fault === 'break') setTimeout(() => req.socket.destroy(), 100);
        });
        answer.once('end', () => {
          if (fault === 'pass') res.end();
        });
      });
      up.on('error', () => req.socket.destroy());
      up.end(Buffer.concat(chunks));
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
