import { scanRequestHead } from '../../../router/http1-request.js';

const scan = (text: string, max = 1024): ReturnType<typeof scanRequestHead> => scanRequestHead(Buffer.from(text, 'latin1'), max);

describe('scanRequestHead', () => {
  it('reads a plain head and says how many bytes it took', () => {
    const text = 'POST /wine/v2/models/m1/infer?x=1 HTTP/1.1\r\nHost: r\r\nContent-Length: 4\r\nX-Multi: a\r\nx-multi: b\r\nConnection: keep-alive, Close\r\n\r\nbody';
    expect(scan(text)).toEqual({
      kind: 'head',
      bytes: text.length - 4,
      head: { method: 'POST', url: '/wine/v2/models/m1/infer?x=1', rawHeaders: ['Host', 'r', 'Content-Length', '4', 'X-Multi', 'a', 'x-multi', 'b', 'Connection', 'keep-alive, Close'], contentLength: 4, close: true },
    });
    expect(scan('GET / HTTP/1.1\r\nHost: r\r\n\r\n')).toMatchObject({ kind: 'head', head: { contentLength: 0, close: false } });
  });

  it('reads every method it serves, and any origin-form target', () => {
    for (const method of ['GET', 'POST', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      expect(scan(`${method} /a/b?c=d&e=%20 HTTP/1.1\r\nHost: r\r\n\r\n`)).toMatchObject({ kind: 'head', head: { method, url: '/a/b?c=d&e=%20' } });
    }
  });

  it('waits for the rest of a head, within the limit', () => {
    expect(scan('GET / HTTP/1.1\r\nHost: r\r\n')).toEqual({ kind: 'incomplete' });
    expect(scan(`GET / HTTP/1.1\r\nX: ${'a'.repeat(100)}`, 64)).toMatchObject({ kind: 'other', reason: 'head too large' });
    expect(scan(`GET / HTTP/1.1\r\nHost: r\r\nX: ${'a'.repeat(60)}\r\n\r\n`, 64)).toMatchObject({ kind: 'other', reason: 'head too large' });
  });

  it('leaves everything outside the plain subset to node:http', () => {
    for (const text of [
      'GET / HTTP/1.0\r\nHost: r\r\n\r\n',
      'BREW / HTTP/1.1\r\nHost: r\r\n\r\n',
      'GET http://r/ HTTP/1.1\r\nHost: r\r\n\r\n',
      'GET /a b HTTP/1.1\r\nHost: r\r\n\r\n',
      'get / HTTP/1.1\r\nHost: r\r\n\r\n',
      'GETS / HTTP/1.1\r\nHost: r\r\n\r\n',
      'GET  / HTTP/1.1\r\nHost: r\r\n\r\n',
      'GET HTTP/1.1\r\nHost: r\r\n\r\n',
      'GET / HTTP/1.1 \r\nHost: r\r\n\r\n',
      'GET / http/1.1\r\nHost: r\r\n\r\n',
      '\r\nGET / HTTP/1.1\r\nHost: r\r\n\r\n',
      'GET / HTTP/1.1\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: r\r\nHost: s\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: r\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: r\r\nContent-Length: +1\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: r\r\nExpect: 100-continue\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: r\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: r\r\nX: 1\r\n folded\r\n\r\n',
      'GET / HTTP/1.1\r\nHost : r\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: r\x00\r\n\r\n',
    ]) {
      expect(scan(text).kind).toBe('other');
    }
  });
});
