import {
  connect,
  constants,
  createServer,
  type ClientHttp2Session,
  type Http2Server,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';

/**
 * What a relay does to the next call it gets:
 * - pass: relays it to the replica and its answer back, frame by frame;
 * - reset: resets it (RST_STREAM REFUSED_STREAM) before any answer, after `delayMs`;
 * - break: relays the answer's headers and its first bytes, then resets the stream;
 * - stall: relays the answer's headers and its first bytes, then nothing more;
 * - goaway: relays the call, then sends its connection away (GOAWAY) and closes it.
 */
export type Fault = 'pass' | 'reset' | 'break' | 'stall' | 'goaway';

/** What the relays of one test share: the faults for the next calls (any relay's), then `pass`. */
export class Faults {
  private readonly queue: Fault[] = [];
  delayMs = 0;

  /** The next calls get these faults, in order, whichever relay they reach. */
  next(...faults: Fault[]): void {
    this.queue.push(...faults);
  }

  take(): Fault {
    return this.queue.shift() ?? 'pass';
  }
}

/** The headers of one call a relay received. */
export interface RelayedCall {
  headers: IncomingHttpHeaders;
  at: number;
}

function withoutPseudo(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(':') && v !== undefined) out[k] = v;
  return out;
}

/**
 * A real replica's gRPC port behind a relay (node:http2 server and client) that misbehaves on
 * cue, as a replica's connection can: a call reset before its answer, an answer broken off or
 * stalled after its first bytes, a connection sent away. A test names the relay as the replica's
 * gRPC port in the router's static routes (`?grpc-port=`), the replica's HTTP port staying the
 * one discovery reads.
 */
export class GrpcFaultRelay {
  readonly calls: RelayedCall[] = [];
  /** Connections the relay accepted. */
  connections = 0;
  private upstream: ClientHttp2Session | undefined;
  private readonly sessions = new Set<ServerHttp2Session>();

  private constructor(
    private readonly server: Http2Server,
    readonly port: number,
    private readonly target: string,
    private readonly faults: Faults,
  ) {}

  static async start(target: string, faults: Faults): Promise<GrpcFaultRelay> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const relay = new GrpcFaultRelay(server, (server.address() as AddressInfo).port, target, faults);
    server.on('session', (s) => {
      relay.connections++;
      relay.sessions.add(s);
      s.on('error', () => undefined);
      s.once('close', () => relay.sessions.delete(s));
    });
    server.on('stream', (stream, headers) => relay.onStream(stream, headers));
    return relay;
  }

  private client(): ClientHttp2Session {
    if (this.upstream === undefined || this.upstream.closed || this.upstream.destroyed) {
      this.upstream = connect(`http://${this.target}`);
      this.upstream.on('error', () => undefined);
    }
    return this.upstream;
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on('error', () => undefined);
    this.calls.push({ headers, at: Date.now() });
    const fault = this.faults.take();
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.once('end', () => {
      if (fault === 'reset') {
        setTimeout(() => stream.close(constants.NGHTTP2_REFUSED_STREAM), this.faults.delayMs);
        return;
      }
      const req = this.client().request({ ':method': 'POST', ':path': headers[':path'], ...withoutPseudo(headers) });
      req.on('error', () => undefined);
      let sent = 0;
      req.once('response', (h: IncomingHttpHeaders, flags: number) => {
        const trailersOnly = (flags & constants.NGHTTP2_FLAG_END_STREAM) !== 0;
        stream.respond(withoutPseudo(h), trailersOnly ? { endStream: true } : { waitForTrailers: true });
      });
      req.on('data', (c: Buffer) => {
        if (fault === 'pass' || fault === 'goaway') return void stream.write(c);
        if (sent > 0) return;
        // The answer's first DATA frame (its prefix at least): the answer has begun.
        sent = c.length;
        stream.write(c);
        if (fault === 'break') setTimeout(() => stream.close(constants.NGHTTP2_INTERNAL_ERROR), 100);
      });
      req.once('trailers', (t: IncomingHttpHeaders) => {
        if (fault === 'break' || fault === 'stall') return;
        stream.once('wantTrailers', () => stream.sendTrailers(withoutPseudo(t)));
        stream.end();
      });
      if (fault === 'goaway') {
        const s = stream.session as ServerHttp2Session;
        stream.once('close', () => {
          s.goaway(constants.NGHTTP2_NO_ERROR);
          s.close();
        });
      }
      req.end(Buffer.concat(chunks));
    });
  }

  async close(): Promise<void> {
    for (const s of this.sessions) s.destroy();
    this.upstream?.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
