import { connect as connectTcp } from 'node:net';
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders, type Settings } from 'node:http2';

/**
 * A gRPC client at the HTTP/2 frame level (node:http2's client session): it sends what a real
 * client would not — half a message, a call reset right after its message, a window never
 * opened — so that tests drive the servers' bounds as an attacker would.
 */

/** How a call ended, as the client saw it. */
export interface RawAnswer {
  /** grpc-status of the trailers (or of a trailers-only answer); undefined when none came. */
  grpcStatus: number | undefined;
  grpcMessage: string | undefined;
  /** x-modelmux-error-code, when the server sent one. */
  code: string | undefined;
  /** The answer's DATA bytes (prefix included). */
  body: Buffer;
  /** The RST_STREAM code the stream closed with (0 for a clean end). */
  rstCode: number | undefined;
  ms: number;
}

export interface RawCall {
  stream: ClientHttp2Stream;
  answer: Promise<RawAnswer>;
}

/** How a call ended, from its last header block (trailers, or a trailers-only answer), its DATA bytes and its RST_STREAM code; `t0` when it started. */
export function rawAnswer(headers: IncomingHttpHeaders | OutgoingHttpHeaders, body: Buffer, rstCode: number | undefined, t0: number): RawAnswer {
  const text = (key: string): string | undefined => {
    const v = headers[key];
    return typeof v === 'string' ? v : undefined;
  };
  const status = text('grpc-status');
  const message = text('grpc-message');
  return {
    grpcStatus: status === undefined ? undefined : Number(status),
    grpcMessage: message === undefined ? undefined : decodeURIComponent(message),
    code: text('x-modelmux-error-code'),
    body,
    rstCode,
    ms: performance.now() - t0,
  };
}

/** A length-prefixed gRPC message of `message`'s bytes. */
export { framedMessage as framed } from '../common/grpc/grpc-frame.js';

export class RawGrpcConnection {
  /** The GOAWAY error code the server sent, if any. */
  goawayCode: number | undefined;
  readonly closed: Promise<void>;

  private constructor(readonly session: ClientHttp2Session) {
    session.on('goaway', (code: number) => (this.goawayCode = code));
    session.on('error', () => undefined);
    this.closed = new Promise((resolve) => session.once('close', () => resolve()));
  }

  /**
   * Connects to `address` (host:port) from `localAddress` (another loopback address is another
   * client to the server's per-client bounds); `settings` are the client's (initialWindowSize: 1
   * for a client that never takes answers).
   */
  static async open(address: string, o: { settings?: Settings; localAddress?: string } = {}): Promise<RawGrpcConnection> {
    const [host = '', port = ''] = [address.slice(0, address.lastIndexOf(':')), address.slice(address.lastIndexOf(':') + 1)];
    const session = connect(`http://${address}`, {
      settings: o.settings ?? {},
      createConnection: () => connectTcp({ host, port: Number(port), ...(o.localAddress === undefined ? {} : { localAddress: o.localAddress }) }),
    });
    await new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
      session.once('close', () => reject(new Error('closed before connecting')));
    });
    return new RawGrpcConnection(session);
  }

  /**
   * Opens a call of `method` and writes `bytes` (a framed message, or part of one); ends the
   * request when `end`. `read: false` leaves the answer's bytes unread (with a window of 1, the
   * server can send almost none of it).
   */
  call(method: string, bytes: Buffer, o: { end?: boolean; read?: boolean; metadata?: Record<string, string> } = {}): RawCall {
    const t0 = performance.now();
    const stream = this.session.request({
      ':method': 'POST',
      ':path': `/inference.GRPCInferenceService/${method}`,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...o.metadata,
    });
    stream.on('error', () => undefined);
    const answer = new Promise<RawAnswer>((resolve) => {
      let headers: IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on('response', (h, flags) => {
        if (flags & constants.NGHTTP2_FLAG_END_STREAM) headers = h;
      });
      stream.on('trailers', (t: IncomingHttpHeaders) => {
        headers = t;
      });
      if (o.read === false) stream.pause();
      else stream.on('data', (c: Buffer) => chunks.push(c));
      stream.once('close', () => resolve(rawAnswer(headers, Buffer.concat(chunks), stream.rstCode, t0)));
    });
    if (o.end === false) stream.write(bytes);
    else stream.end(bytes);
    return { stream, answer };
  }

  close(): void {
    this.session.destroy();
  }
}
