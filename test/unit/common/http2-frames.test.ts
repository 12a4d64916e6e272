import { CLIENT_PREFACE, ConnectionError, ErrorCode, Flag, FrameType, frameHeaderError, type Frame } from '../../../common/http2/frame-types.js';
import { FrameReader } from '../../../common/http2/frame-reader.js';
import { dataFrames, frame, headersFrames, pingFrame, settingsFrame } from '../../../common/http2/frame-writer.js';
import { requestHeaders, responseFields } from '../../../common/http2/header-fields.js';

/** The frames a reader yields for `bytes` written as chunks cut at `cuts`. */
function readAll(bytes: Buffer, cuts: number[]): Frame[] {
  const reader = new FrameReader(16_384, () => undefined);
  const frames: Frame[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    reader.push(bytes.subarray(from, cut), (f) => frames.push({ ...f, payload: Buffer.from(f.payload) }));
    from = cut;
  }
  return frames;
}

const REQUEST = [':method', 'POST', ':scheme', 'http', ':path', '/p', ':authority', 'a'];

describe('the own HTTP/2 frame reader', () => {
  const bytes = Buffer.concat([CLIENT_PREFACE, settingsFrame([[4, 1000]]), pingFrame(Buffer.alloc(8, 7), false), dataFrames(1, Buffer.alloc(40_000, 1), 16_384, true)]);

  it('yields the same frames wherever the bytes are cut', () => {
    const whole = readAll(bytes, []);
    expect(whole.map((f) => [f.type, f.payload.length])).toEqual([
      [FrameType.SETTINGS, 6],
      [FrameType.PING, 8],
      [FrameType.DATA, 16_384],
      [FrameType.DATA, 16_384],
      [FrameType.DATA, 40_000 - 2 * 16_384],
    ]);
    for (let cut = 1; cut < bytes.length; cut += 97) expect(readAll(bytes, [cut, Math.min(bytes.length, cut + 5)])).toEqual(whole);
  });

  it('refuses a frame over its maximum size from its header, before the payload comes', () => {
    const reader = new FrameReader(16_384, () => undefined);
    const header = frame(FrameType.DATA, 0, 1, Buffer.alloc(16_385)).subarray(0, 9);
    expect(() => reader.push(Buffer.concat([CLIENT_PREFACE, header]), () => undefined)).toThrow(expect.objectContaining({ code: ErrorCode.FRAME_SIZE_ERROR }) as Error);
  });

  it('refuses bytes that are not the client preface, even split', () => {
    const reader = new FrameReader(16_384, () => undefined);
    reader.push(CLIENT_PREFACE.subarray(0, 10), () => undefined);
    expect(() => reader.push(Buffer.from('GET / HTTP/1.1\r\n'), () => undefined)).toThrow(ConnectionError);
  });

  it('finds from a header alone a connection frame on a stream, a length its type cannot have and a PUSH_PROMISE', () => {
    expect(frameHeaderError(FrameType.PING, 0, 1, 8)?.code).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(frameHeaderError(FrameType.PING, 0, 0, 7)?.code).toBe(ErrorCode.FRAME_SIZE_ERROR);
    expect(frameHeaderError(FrameType.SETTINGS, Flag.ACK, 0, 6)?.code).toBe(ErrorCode.FRAME_SIZE_ERROR);
    expect(frameHeaderError(FrameType.DATA, 0, 0, 1)?.code).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(frameHeaderError(FrameType.PUSH_PROMISE, 0, 1, 4)?.code).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(frameHeaderError(FrameType.DATA, 0, 1, 16_384)).toBeUndefined();
  });
});

describe('the own HTTP/2 frame writers', () => {
  it('cut a header block at the peer’s frame size: END_STREAM on the HEADERS, END_HEADERS on the last CONTINUATION', () => {
    const frames = readAll(Buffer.concat([CLIENT_PREFACE, headersFrames(3, Buffer.alloc(20_000, 2), 16_384, true)]), []);
    expect(frames.map((f) => [f.type, f.flags, f.streamId, f.payload.length])).toEqual([
      [FrameType.HEADERS, Flag.END_STREAM, 3, 16_384],
      [FrameType.CONTINUATION, Flag.END_HEADERS, 3, 20_000 - 16_384],
    ]);
  });
});

describe('request header fields as nghttp2 and node:http2 take them', () => {
  it('builds the headers as node:http2 does: repeated fields joined, cookies with "; ", set-cookie an array, single-value fields their first', () => {
    const h = requestHeaders([...REQUEST, 'x-a', '1', 'x-a', '2', 'cookie', 'c=1', 'cookie', 'd=2', 'set-cookie', 's', 'content-type', 'application/grpc', 'content-type', 'text/plain']);
    expect(h).toEqual({ ':method': 'POST', ':scheme': 'http', ':path': '/p', ':authority': 'a', 'x-a': '1, 2', cookie: 'c=1; d=2', 'set-cookie': ['s'], 'content-type': 'application/grpc' });
  });

  it('leaves out a regular field of a malformed name or value, as nghttp2 does', () => {
    expect(requestHeaders([...REQUEST, 'x bad', '1', 'x-ok', 'v ', 'x-good', 'v'])).toEqual({ ':method': 'POST', ':scheme': 'http', ':path': '/p', ':authority': 'a', 'x-good': 'v' });
  });

  it('refuses a request with an upper-case field name, as nghttp2 does (RFC 9113 §8.2.1)', () => {
    expect(typeof requestHeaders([...REQUEST, 'X-Upper', '1'])).toBe('string');
  });

  it.each([
    ['a pseudo-header after a regular field', ['x-a', '1', ...REQUEST]],
    ['an unknown pseudo-header', [...REQUEST, ':protocol', 'ws']],
    ['a repeated pseudo-header', [...REQUEST, ':path', '/q']],
    ['a connection-specific field', [...REQUEST, 'connection', 'close']],
    ['te other than trailers', [...REQUEST, 'te', 'gzip']],
    ['no :authority or host', [':method', 'POST', ':scheme', 'http', ':path', '/p']],
    ['a malformed content-length', [...REQUEST, 'content-length', '1x']],
  ])('refuses a request with %s', (_what, fields) => {
    expect(typeof requestHeaders(fields)).toBe('string');
  });

  it('writes response pseudo-headers before the other fields, whatever the object’s order', () => {
    expect(responseFields({ 'x-a': '1', ':status': 200, 'x-b': ['2', '3'] })).toEqual([':status', '200', 'x-a', '1', 'x-b', '2', 'x-b', '3']);
  });
});
