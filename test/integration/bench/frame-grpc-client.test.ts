import { constants, createServer, type Http2Server, type ServerHttp2Session, type ServerHttp2Stream, type Settings } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { FrameGrpcConnection } from '../../../harness/frame-grpc-client.js';
import { framed, type RawAnswer, RawGrpcConnection } from '../../../harness/raw-grpc-client.js';

// bench:grpc's closed-loop gRPC client (harness/frame-grpc-client.ts) on the project's own HTTP/2
// framing, against node:http2's server — nghttp2 indexes the answers' fields into HPACK's dynamic
// table, sets its own windows and frame size — and beside node:http2's own client on the same
// calls: what one client reads, the other must read.

/** Echoes the message in an answer with headers, DATA and trailers; other paths end otherwise. */
function handle(stream: ServerHttp2Stream, path: string): void {
  stream.on('error', () => undefined);
  if (path.endsWith('/Missing')) {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5', 'grpc-message': 'no%20such%20model', 'x-modelmux-error-code': 'model_not_found' }, { endStream: true });
    return;
  }
  if (path.endsWith('/Hang')) return;
  if (path.endsWith('/Reset')) {
    stream.close(constants.NGHTTP2_CANCEL);
    return;
  }
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  stream.on('end', () => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-modelmux-replica': 'replica-0' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'x-modelmux-cache': 'hit' }));
    stream.end(Buffer.concat(chunks));
  });
}

async function serve(settings: Settings = {}): Promise<{ server: Http2Server; address: string; sessions: ServerHttp2Session[] }> {
  const server = createServer({ settings });
  const sessions: ServerHttp2Session[] = [];
  server.on('session', (s) => sessions.push(s));
  server.on('stream', (stream, headers) => handle(stream, String(headers[':path'])));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, address: `127.0.0.1:${(server.address() as AddressInfo).port}`, sessions };
}

const close = (server: Http2Server, sessions: readonly ServerHttp2Session[] = []): Promise<void> => {
  sessions.forEach((s) => s.destroy());
  return new Promise((resolve) => server.close(() => resolve()));
};

/** What both clients must agree on: everything but the time taken. */
const seen = ({ ms: _ms, ...rest }: RawAnswer): Omit<RawAnswer, 'ms'> => rest;

describe('FrameGrpcConnection against node:http2', () => {
  it('reads the same answers as node:http2 client does, call after call on one connection', async () => {
    const { server, address } = await serve();
    const frames = await FrameGrpcConnection.open(address);
    const reference = await RawGrpcConnection.open(address);
    try {
      const message = framed(Buffer.from('a wine of eleven features'));
      // Repeated calls: the second answer on nghttp2's side names its fields by dynamic-table index.
      for (let i = 0; i < 3; i++) {
        for (const method of ['ModelInfer', 'Missing', 'Reset']) {
          const ours = await frames.call(method, message);
          const theirs = await reference.call(method, message).answer;
          expect(seen(ours)).toEqual(seen(theirs));
        }
      }
      const ok = await frames.call('ModelInfer', message);
      expect(ok).toMatchObject({ grpcStatus: 0, rstCode: 0 });
      expect(ok.body.equals(message)).toBe(true);
      expect(await frames.call('Missing', message)).toMatchObject({ grpcStatus: 5, grpcMessage: 'no such model', code: 'model_not_found' });
      expect(await frames.call('Reset', message)).toMatchObject({ grpcStatus: undefined, rstCode: constants.NGHTTP2_CANCEL });
    } finally {
      frames.close();
      reference.close();
      await close(server);
    }
  });

  it('keeps to the peer windows and frame size both ways, many calls at once', async () => {
    // A stream window of 1,000 bytes: each 300 KB message goes out as the server opens it.
    const { server, address } = await serve({ initialWindowSize: 1000, maxFrameSize: 65_536 });
    const frames = await FrameGrpcConnection.open(address);
    try {
      const messages = Array.from({ length: 6 }, (_, i) => framed(Buffer.alloc(300_000 + i, i)));
      const answers = await Promise.all(messages.map((m) => frames.call('ModelInfer', m)));
      answers.forEach((a, i) => {
        expect(a.grpcStatus).toBe(0);
        expect(a.body.equals(messages[i] as Buffer)).toBe(true);
      });
    } finally {
      frames.close();
      await close(server);
    }
  });

  it('starts no call after a GOAWAY and fails the calls in flight when the connection goes', async () => {
    const { server, address, sessions } = await serve();
    const frames = await FrameGrpcConnection.open(address);
    try {
      const message = framed(Buffer.from('x'));
      expect((await frames.call('ModelInfer', message)).grpcStatus).toBe(0);
      const hanging = frames.call('Hang', message);
      // nghttp2 names in its GOAWAY no stream above the last it has read.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const session = sessions[0] as ServerHttp2Session;
      session.goaway(constants.NGHTTP2_NO_ERROR, 3);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(frames.usable).toBe(false);
      await expect(frames.call('ModelInfer', message)).rejects.toThrow(/GOAWAY \(0\)/);
      session.destroy();
      await expect(hanging).rejects.toThrow(/closed/);
    } finally {
      frames.close();
      await close(server);
    }
  });
});
