import { scanRequestHead } from '../../../router/http1/http1-request.js';

const scan = (text: string, max = 1024): ReturnType<typeof scanRequestHead> => scanRequestHead(Buffer.from(text, 'latin1'), max);

describe('scanRequestHead', () => {
  it('reads a plain head and says how many bytes it took', () => {
    const text = 'POST /wine/v2/models/m1/infer?x=1 HTTP/1.1\r\nHost: r\r\nContent-Length: 4\r\nX-Multi: a\r\nx-multi: b\r\nConnection: keep-alive, Close\r\n\r\nbody';
    expect(scan(text)).toEqual({
      kind: 'head',
      bytes: text.length - 4,
      head: {
        method: 'POST',
        url: '/wine/v2/models/m1/infer?x=1',
        rawHeaders: ['Host', 'r', 'Content-Length', '4', 'X-Multi', 'a', 'x-multi', 'b', 'Connection', 'keep-alive, Close'],
        contentLength: 4,
        close: true,
      },
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

  it('waits at every split of a plain head, and leaves a head to node:http at its first byte outside the subset', () => {
    const plain = "PATCH /a?b=c&d=%20 HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\nX-E:\r\nx!#$%&'*+.^_`|~: \t v\xe9 \t\r\n\r\n";
    for (let i = 0; i < plain.length - 4; i++) expect([i, scan(plain.slice(0, i)).kind]).toEqual([i, 'incomplete']);
    expect(scan(plain).kind).toBe('head');
    for (const start of [
      'GET / HTTP/1.1\nHost: x\n\n',
      'GET / HTTP/1.1\r\nHost: x\n',
      'GET / HTTP/1.1\r\nHost: x\r\n\n',
      'GET / HTTP/1.1\r\nHost: x\rY',
      'GET / HTTP/1.0\r',
      'GET / HTTP/1.1 ',
      'GET /a b',
      'GET  /',
      'get ',
      'BREW',
      'GET / HTTP/1.1\r\nHost : x',
      'GET / HTTP/1.1\r\nHost: x\r\n folded',
      'GET / HTTP/1.1\r\nHost: x\x00',
      'GET / HTTP/1.1\r\nBad\x7f',
      'GET / HTTP/1.1\r\nHost: x\r\nX\t: 1\r\n',
      'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n',
      'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nHo',
      '\x00',
      '\r\n',
    ]) {
      expect([start, scan(start).kind]).toEqual([start, 'other']);
    }
  });

  it('leaves a HEAD request with a body to node:http, which reads no body after HEAD', () => {
    expect(scan('HEAD / HTTP/1.1\r\nHost: r\r\nContent-Length: 3\r\n\r\nabc')).toMatchObject({ kind: 'other', reason: 'HEAD with a body' });
    expect(scan('HEAD / HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\n\r\n').kind).toBe('head');
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
