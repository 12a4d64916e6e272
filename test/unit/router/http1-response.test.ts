import { ResponseParser, type ResponseHead, type ResponseSink } from '../../../router/exchange/http1-response.js';
import { ProtocolError, fieldValue, headerFields } from '../../../router/http1/http1-syntax.js';

/** Records what the parser reports, in order. */
class Recorder implements ResponseSink {
  heads: ResponseHead[] = [];
  body: Buffer[] = [];
  completions = 0;
  onHead(head: ResponseHead): void {
    this.heads.push(head);
  }
  onBody(chunk: Buffer): void {
    this.body.push(Buffer.from(chunk));
  }
  onComplete(): void {
    this.completions++;
  }
  get text(): string {
    return Buffer.concat(this.body).toString('latin1');
  }
}

function parser(headRequest = false, maxHeadBytes = 1024): { p: ResponseParser; r: Recorder } {
  const r = new Recorder();
  const p = new ResponseParser(r, maxHeadBytes);
  p.reset(headRequest);
  return { p, r };
}

/** Feeds `text` in pieces of `size` bytes, so every state boundary is crossed mid-buffer. */
function feed(p: ResponseParser, text: string, size: number): void {
  const bytes = Buffer.from(text, 'latin1');
  for (let i = 0; i < bytes.length; i += size) p.execute(bytes.subarray(i, i + size));
}

const CHUNKED = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n';

describe('ResponseParser', () => {
  it('parses a Content-Length response fed in any split, keeping repeated fields in order', () => {
    const text = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nContent-Length: 11\r\nKeep-Alive: timeout=5, max=100\r\n\r\n{"ok":true}';
    for (const size of [1, 2, 7, 64, text.length]) {
      const { p, r } = parser();
      feed(p, text, size);
      expect(r.heads).toHaveLength(1);
      expect(r.heads[0]).toEqual({
        status: 200,
        headers: ['content-type', 'application/json', 'set-cookie', 'a=1', 'set-cookie', 'b=2', 'content-length', '11', 'keep-alive', 'timeout=5, max=100'],
        reusable: true,
        keepAliveMs: 5000,
      });
      expect(r.text).toBe('{"ok":true}');
      expect(r.completions).toBe(1);
      expect(p.complete).toBe(true);
    }
  });

  it("reads each response's own Keep-Alive timeout, also when responses alternate between values", () => {
    const hints: (number | undefined)[] = [];
    for (const value of ['timeout=5', 'timeout=5', 'max=100, timeout=7', 'timeout=5', 'max=3', 'timeout=5']) {
      const { p, r } = parser();
      feed(p, `HTTP/1.1 204 No Content\r\nKeep-Alive: ${value}\r\n\r\n`, 64);
      hints.push(r.heads[0]?.keepAliveMs);
    }
    expect(hints).toEqual([5000, 5000, 7000, 5000, undefined, 5000]);
  });

  it('keeps a connection that says keep-alive and closes one whose Connection lists close in any case', () => {
    const reusable = (connection: string): boolean | undefined => {
      const { p, r } = parser();
      feed(p, `HTTP/1.1 200 OK\r\nConnection: ${connection}\r\nContent-Length: 0\r\n\r\n`, 64);
      return r.heads[0]?.reusable;
    };
    expect(reusable('keep-alive')).toBe(true);
    expect(reusable('Keep-Alive')).toBe(true);
    expect(reusable('close')).toBe(false);
    expect(reusable('CLOSE')).toBe(false);
    expect(reusable('keep-alive, close')).toBe(false);
  });

  it('decodes chunked bodies across splits and skips trailers', () => {
    for (const size of [1, 3, 10, CHUNKED.length]) {
      const { p, r } = parser();
      feed(p, CHUNKED, size);
      expect(r.text).toBe('hello, world');
      expect(r.heads[0]?.reusable).toBe(true);
      expect(fieldValue(r.heads[0]?.headers ?? [], 'x-trailer')).toBeUndefined();
      expect(fieldValue(r.heads[0]?.headers ?? [], 'x-a')).toBe('1');
      expect(r.completions).toBe(1);
    }
  });

  it('runs a body without length to the end of the connection, which is then not reusable', () => {
    const { p, r } = parser();
    feed(p, 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart one, ', 5);
    p.execute(Buffer.from('part two'));
    expect(p.untilClose).toBe(true);
    expect(r.completions).toBe(0);
    p.end();
    expect(r.text).toBe('part one, part two');
    expect(r.heads[0]?.reusable).toBe(false);
    expect(r.completions).toBe(1);
  });

  it('knows the responses that have no body: 204, 304, answers to HEAD and Content-Length 0', () => {
    for (const [text, head] of [
      ['HTTP/1.1 204 No Content\r\n\r\n', false],
      ['HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n', false],
      ['HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n', true],
      ['HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', false],
    ] as const) {
      const { p, r } = parser(head);
      p.execute(Buffer.from(text));
      expect(r.completions).toBe(1);
      expect(r.body).toHaveLength(0);
      expect(r.heads[0]?.reusable).toBe(true);
    }
  });

  it('skips interim 1xx responses and refuses a protocol switch', () => {
    const { p, r } = parser();
    p.execute(Buffer.from('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok'));
    expect(r.heads.map((h) => h.status)).toEqual([201]);
    expect(r.text).toBe('ok');
    expect(() => parser().p.execute(Buffer.from('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n'))).toThrow(ProtocolError);
  });

  it('marks Connection: close and HTTP/1.0 answers as not reusable', () => {
    for (const text of ['HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n', 'HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n']) {
      const { p, r } = parser();
      p.execute(Buffer.from(text));
      expect(r.heads[0]?.reusable).toBe(false);
    }
    const { p, r } = parser();
    p.execute(Buffer.from('HTTP/1.1 200 OK\r\nConnection: x-closeish\r\nContent-Length: 0\r\n\r\n'));
    expect(r.heads[0]?.reusable).toBe(true);
  });

  it('refuses what could desynchronise the connection', () => {
    const bad = [
      'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n',
      'HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n',
      'HTTP/1.1 200 OK\r\nX-A : 1\r\n\r\n',
      'HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n',
      'HTTP/2 200 OK\r\n\r\n',
      'HTTP/1.1 2000 OK\r\n\r\n',
      'HTTP/1.1 099 Low\r\n\r\n',
      'HTTP/1.2 200 OK\r\n\r\n',
      'HTTP/1.1 20 OK\r\n\r\n',
      'HTTP/1.1  200 OK\r\n\r\n',
      'HTTP/1.1 200OK\r\n\r\n',
      'HTTP/1.1 2x0 OK\r\n\r\n',
      'HTTP/1.1 200 O\rK\r\n\r\n',
      'HTTP/1.1 200 O\nK\r\n\r\n',
      'http/1.1 200 OK\r\n\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY',
    ];
    for (const text of bad) expect(() => parser().p.execute(Buffer.from(text))).toThrow(ProtocolError);
  });

  it('refuses what llhttp refuses where it would frame the answer differently (found by the differential test)', () => {
    const chunked = (line: string, trailers = ''): string => `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${line}\r\na\r\n0\r\n${trailers}\r\n`;
    const bad = [
      // Chunk extensions with whitespace, an unquoted space, no name, a quoted-pair or a control character.
      chunked('1 ;a'),
      chunked('1\t;a'),
      chunked('1; a'),
      chunked('1;a '),
      chunked('1;a=b c'),
      chunked('1;'),
      chunked('1;a="b\\"c"'),
      chunked('1;a="b\x01"'),
      chunked('1;a\x00'),
      // A malformed trailer line, and a malformed field in an interim answer.
      chunked('1', 'X T: 1\r\n'),
      chunked('1', 'X-T\r\n'),
      'HTTP/1.1 100 Continue\r\nContinue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
      // No coding, and a tab after the last one (llhttp then reads to the end of the connection).
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\t\r\n\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\t \r\n\r\n',
      // A control character in the reason phrase, also when the head comes whole.
      'HTTP/1.1 200 \x01\r\nContent-Length: 0\r\n\r\n',
    ];
    for (const text of bad) expect(() => feed(parser().p, text, text.length)).toThrow(ProtocolError);
    for (const line of ['1', '001', '1;a', '1;a=b;c=d', '1;a="b c"', '1;a=""', '1;a=', '1;=b', '1;a;b']) {
      const { p, r } = parser();
      feed(p, chunked(line, 'X-T: 1\r\n'), 3);
      expect(r.text).toBe('a');
      expect(r.completions).toBe(1);
    }
  });

  it('reads status lines with and without a reason phrase', () => {
    for (const [line, status] of [
      ['HTTP/1.1 200', 200],
      ['HTTP/1.1 404 Not Found', 404],
      ['HTTP/1.0 503 ', 503],
      ['HTTP/1.1 599 \x80odd reason', 599],
    ] as const) {
      const { p, r } = parser();
      p.execute(Buffer.from(`${line}\r\nContent-Length: 0\r\n\r\n`, 'latin1'));
      expect(r.heads[0]?.status).toBe(status);
    }
  });

  it('collapses identical Content-Length values, repeated or listed, into one field for the client', () => {
    for (const fields of ['Content-Length: 2\r\nX-A: 1\r\ncontent-length: 2', 'Content-Length: 2, 2\r\nX-A: 1', 'X-A: 1\r\nContent-Length: 2,2\r\nContent-Length: 2']) {
      const { p, r } = parser();
      p.execute(Buffer.from(`HTTP/1.1 200 OK\r\n${fields}\r\n\r\nok`));
      expect(r.text).toBe('ok');
      expect(r.completions).toBe(1);
      const headers = r.heads[0]?.headers ?? [];
      expect(headers.filter((_, i) => i % 2 === 0 && headers[i] === 'content-length')).toHaveLength(1);
      expect(fieldValue(headers, 'content-length')).toBe('2');
      expect(fieldValue(headers, 'x-a')).toBe('1');
    }
    // A single field is passed on as it came.
    const { p, r } = parser();
    p.execute(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
    expect(r.heads[0]?.headers).toEqual(['content-length', '2']);
  });

  it('refuses differing Content-Length values, repeated or listed', () => {
    for (const fields of ['Content-Length: 2\r\nContent-Length: 3', 'Content-Length: 2, 3', 'Content-Length: 2, 2\r\nContent-Length: 3', 'Content-Length: 2,', 'Content-Length: 2, x']) {
      expect(() => parser().p.execute(Buffer.from(`HTTP/1.1 200 OK\r\n${fields}\r\n\r\nok`))).toThrow('bad Content-Length');
    }
  });

  it('refuses a head with bare-LF line ends at once, without waiting for a blank line that never comes', () => {
    for (const start of ['HTTP/1.1 200 OK\nContent-Length: 0\n\n', 'HTTP/1.1 200 OK\r\nX-A: 1\n', 'HTTP/1.1 200 OK\r\nX-A: 1\rX', 'HTTP/1.1 200 OK\r\nX-A: \x00']) {
      expect(() => parser().p.execute(Buffer.from(start, 'latin1'))).toThrow(ProtocolError);
    }
    // A CR at the end of a read may meet its LF in the next one.
    const { p, r } = parser();
    feed(p, 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok', 17);
    expect(r.text).toBe('ok');
    const chunked = parser();
    expect(() => chunked.p.execute(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok'))).toThrow('bad chunk size line');
  });

  it('bounds the head, including one that never ends', () => {
    const { p } = parser(false, 64);
    expect(() => p.execute(Buffer.from(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(100)}`))).toThrow(/head too large/);
    const q = parser(false, 64);
    expect(() => q.p.execute(Buffer.from(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(60)}\r\n\r\n`))).toThrow(/head too large/);
  });

  it('refuses bytes after a complete response', () => {
    const { p, r } = parser();
    expect(() => p.execute(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA'))).toThrow(/after the end/);
    // The response itself was whole before the stray bytes.
    expect(r.text).toBe('ok');
    expect(r.completions).toBe(1);
  });

  it('tells a connection closed before any byte from one that cut the response off', () => {
    const a = parser();
    expect(() => a.p.end()).toThrow(/closed before a response/);
    const b = parser();
    b.p.execute(Buffer.from('HTTP/1.1 200 OK\r\nContent-Le'));
    expect(() => b.p.end()).toThrow(/cut off/);
    const c = parser();
    c.p.execute(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc'));
    expect(() => c.p.end()).toThrow(/cut off/);
  });

  it('parses the next response on the same parser after reset', () => {
    const { p, r } = parser();
    p.execute(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na'));
    p.reset(false);
    feed(p, CHUNKED, 4);
    expect(r.heads).toHaveLength(2);
    expect(r.text).toBe('ahello, world');
    expect(r.completions).toBe(2);
  });
});

describe('headerFields', () => {
  it('trims optional whitespace and keeps names as sent, repeated fields in order', () => {
    expect(headerFields('X-One:  a b \t\r\nx-one:c\r\nEmpty:')).toEqual(['X-One', 'a b', 'x-one', 'c', 'Empty', '']);
    expect(headerFields('')).toEqual([]);
  });
  it('refuses the lines that one field per line would refuse, wherever they are in the block', () => {
    for (const bad of [': v', 'novalue', 'a b: c', 'a : c', ' folded: x', 'a:\x00', 'a: b\rc', 'a: b\nc', 'a:b\r\n', 'a:b\r\n\r\nc:d', 'a:\x7f']) {
      for (const block of [bad, `ok: 1\r\n${bad}`, `${bad}\r\nok: 1`]) expect(() => headerFields(block)).toThrow(ProtocolError);
    }
    expect(() => headerFields('ok: 1\r\na b: c')).toThrow('bad header name');
  });
});
