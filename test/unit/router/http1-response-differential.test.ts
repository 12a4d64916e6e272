import * as fc from 'fast-check';
import { request } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { ResponseParser, type ResponseHead, type ResponseSink } from '../../../router/exchange/http1-response.js';
import { checkSeeded, cuts, mutate, mutations, pick, writesOf } from '../../helpers/http1-fuzz.js';

/**
 * The guard ADR 0043 asks of owned protocol code: the router's own HTTP/1.1 response parser
 * (ResponseParser, under the upstream pool) must read a replica's answer as node's own client
 * (llhttp) does. The same response bytes, valid and near-valid and split into several writes,
 * go to ResponseParser and, from a raw TCP server, to a `node:http` request; any difference in
 * whether the answer is taken, in its status, header fields and body, or in whether it ends
 * complete or cut fails the test with the seed that reproduces it.
 *
 * Where one takes an answer the other refuses, the difference must be one the parser has by
 * design (BY_DESIGN).
 *
 * HTTP1_FUZZ_SEED picks another seed (the default is fixed, so CI runs the same cases each time);
 * HTTP1_FUZZ_RUNS another number of cases.
 */

const SEED = Number(process.env['HTTP1_FUZZ_SEED'] ?? 20261205);
const RUNS = Number(process.env['HTTP1_FUZZ_RUNS'] ?? 1000);
/** Both read heads of at most this much; the generated heads stay well under or well over it. */
const MAX_HEAD = 4096;
/** New cases start until then: the test stays well within CI's time. */
const TIME_LIMIT_MS = 15_000;

/**
 * How one reader took one answer. `refused`: no head was taken (a protocol error, or the
 * connection closed first); `cut`: the head was taken but the body did not end; `complete`:
 * head and whole body. The body is compared only for a complete answer: a reader may pass on
 * bytes before it finds what is wrong after them.
 */
interface Outcome {
  end: 'refused' | 'cut' | 'complete';
  status?: number;
  /** Flat `[name, value, …]`, names lowercased, in the order received. */
  headers?: string[];
  body?: string;
}

/** ResponseParser fed the writes one by one, then the close, as the upstream pool feeds it. */
function owned(chunks: readonly Buffer[], head: boolean): Outcome {
  let got: ResponseHead | undefined;
  let body = '';
  const sink: ResponseSink = {
    onHead: (h) => void (got = h),
    onBody: (chunk) => void (body += chunk.toString('latin1')),
    onComplete: () => undefined,
  };
  const p = new ResponseParser(sink, MAX_HEAD);
  p.reset(head);
  try {
    for (const c of chunks) p.execute(c);
    p.end();
  } catch {
    // Bytes after a complete answer: the answer stands (the pool closes the connection).
    if (!p.complete) return got === undefined ? { end: 'refused' } : { end: 'cut', status: got.status, headers: got.headers };
  }
  return { end: 'complete', status: (got as ResponseHead).status, headers: (got as ResponseHead).headers, body };
}

/** What the raw server writes on the next connection, and then it closes. */
let next: readonly Buffer[] = [];
let server: Server;
let port = 0;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  server = createServer((socket: Socket) => {
    const chunks = next;
    socket.on('error', () => undefined);
    socket.once('data', () => {
      void (async () => {
        for (const c of chunks) {
          if (socket.destroyed) return;
          await new Promise<void>((r) => socket.write(c, () => r()));
          // Apart, so that the client reads them apart (most of the time: a loaded machine may merge them).
          await sleep(1);
        }
        socket.end();
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
});

/** node's own client (llhttp) reading the same writes from a socket. */
function llhttp(chunks: readonly Buffer[], head: boolean): Promise<Outcome> {
  next = chunks;
  return new Promise((resolve) => {
    let out: Outcome = { end: 'refused' };
    const done = (): void => resolve(out);
    const req = request({ host: '127.0.0.1', port, method: head ? 'HEAD' : 'GET', path: '/', agent: false, maxHeaderSize: MAX_HEAD });
    // After the head, the answer's own `close` says how it ended.
    req.on('error', () => out.end === 'refused' && done());
    // A protocol switch nobody asked for: node hands the socket over, the router refuses it.
    req.on('upgrade', (_res, socket: Socket) => {
      socket.destroy();
      done();
    });
    req.on('response', (res) => {
      const headers: string[] = [];
      for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.push((res.rawHeaders[i] as string).toLowerCase(), res.rawHeaders[i + 1] as string);
      out = { end: 'cut', status: res.statusCode as number, headers };
      let body = '';
      res.setEncoding('latin1');
      // Flowing: each body chunk comes as llhttp reads it, before an error later in the same read.
      res.on('data', (c: string) => void (body += c));
      res.on('error', () => undefined);
      // `complete` is set where llhttp ends the message; `end` would come a tick later, after
      // the error of bytes that follow the answer (which the router ignores: the answer stands).
      res.on('close', () => {
        if (res.complete) out = { ...out, end: 'complete', body };
        done();
      });
    });
    req.end();
  });
}

// ---- generators: answers as near-valid text, then byte mutations, then a split into writes ----

/** One of `valid`, or, where this answer may be odd, as often one of `invalid`. */
const either = <T>(odd: boolean, valid: readonly T[], invalid: readonly T[]): fc.Arbitrary<T> => (odd ? fc.oneof(fc.constantFrom(...valid), fc.constantFrom(...invalid)) : fc.constantFrom(...valid));

interface Field {
  name: string;
  value: string;
}

type Framing = 'length' | 'chunked' | 'close';

interface Answer {
  interim: string;
  version: string;
  sp: string;
  status: string;
  reason: string;
  framing: Framing;
  /** The values of the Content-Length fields (framing 'length'; others may carry some too when odd). */
  lengths: string[];
  te: string;
  fields: Field[];
  ows: string;
  trailingOws: string;
  eol: string;
  body: string;
  chunkExt: string;
  trailers: string;
  /** Bytes after the answer: the next answer, or bytes no answer holds. */
  after: string;
}

/** The places an odd answer may get wrong, one of them per answer. */
const ODD_PLACES = ['version', 'sp', 'status', 'reason', 'name', 'value', 'eol', 'length', 'te', 'chunk', 'trailers'] as const;
type OddPlace = (typeof ODD_PLACES)[number];

function answers(odd: OddPlace | undefined): fc.Arbitrary<Answer> {
  const at = (place: OddPlace): boolean => place === odd;
  const value = fc.string({
    unit: at('value') ? pick('a', ' ', '\x00', '\x01', '\x7f', '\r', '\n', '\x80') : pick('a', 'Z', '0', ' ', ',', ';', '=', '"', '/', ':', '\t', '\x80', '\xff'),
    maxLength: 12,
  });
  const field: fc.Arbitrary<Field> = fc.record({
    name: either(at('name'), ['X-A', 'x-b', 'Content-Type', 'Set-Cookie', 'Keep-Alive', 'Connection', "x!#$%&'*+.^_`|~"], ['X Space', 'X\x7f', '\xc9t\xe9', 'X(', 'X"', '', 'X\x00', 'X/', ' X']),
    value,
  });
  return fc
    .record({
      interim: fc.oneof({ arbitrary: fc.constant(''), weight: 8 }, { arbitrary: pick('HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n'), weight: 1 }),
      version: either(at('version'), ['HTTP/1.1', 'HTTP/1.0'], ['HTTP/1.2', 'HTTP/2.0', 'http/1.1', 'HTTP/11', 'HTTP/1.1 ', 'HTTP/1.']),
      sp: either(at('sp'), [' '], ['  ', '\t', '']),
      status: either(at('status'), ['200', '201', '204', '304', '404', '500', '503'], ['101', '99', '099', '1000', '20', '2x0', '600', '999', '000']),
      reason: either(at('reason'), [' OK', '', ' ', ' Not Found', ' a b'], [' \x01', ' caf\xe9', ' a\tb', '\tOK', ' \x7f']),
      framing: pick<Framing>('length', 'length', 'chunked', 'close'),
      lengthCount: either(at('length'), [1], [0, 2, 3]),
      te: either(at('te'), ['chunked'], ['Chunked', 'chunked, chunked', 'gzip, chunked', 'chunked, gzip', 'identity', ' chunked', 'xchunked', 'chunked,', '']),
      fields: fc.array(field, { maxLength: 4 }),
      ows: pick(' ', '', '  ', '\t'),
      trailingOws: pick('', ' ', '\t'),
      eol: either(at('eol'), ['\r\n'], ['\n', '\r', '\r\r\n']),
      body: fc.string({ unit: pick('a', 'b', '\r', '\n', '0', ' ', '\x00', '\xff'), maxLength: 24 }),
      chunkExt: either(at('chunk'), ['', ';a=b', ';a="b c"', ' ;a'], [';\x00', ';a=b c', 'g', ' ', ';', ';=b']),
      trailers: either(at('trailers'), ['', 'X-T: 1\r\n'], ['X T: 1\r\n', 'X-T\r\n', 'X-T: \x00\r\n', ' X: 1\r\n']),
      after: fc.oneof({ arbitrary: fc.constant(''), weight: 6 }, { arbitrary: pick('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz', 'zz', '\r\n'), weight: 1 }),
    })
    .chain(({ lengthCount, ...a }) => {
      const n = a.body.length;
      // The answer's own Content-Length fields: one for a length-framed answer, none else; odd ones differ.
      const count = a.framing === 'length' ? lengthCount : Math.max(0, lengthCount - 1);
      const length = either(at('length'), [String(n)], [String(n + 1), `0${n}`, `+${n}`, `-${n}`, `${n}, ${n}`, `${n},${n + 1}`, '', `0x${n.toString(16)}`, '9'.repeat(16), `${n} ${n}`]);
      return fc.array(length, { minLength: count, maxLength: count }).map((lengths) => ({ ...a, lengths }));
    });
}

/** An answer as bytes (latin1 text). */
function serialize(a: Answer): string {
  const fields: Field[] = a.lengths.map((value) => ({ name: 'Content-Length', value }));
  if (a.framing === 'chunked') fields.push({ name: 'Transfer-Encoding', value: a.te });
  fields.push(...a.fields);
  let out = `${a.interim}${a.version}${a.sp}${a.status}${a.reason}${a.eol}`;
  for (const f of fields) out += `${f.name}:${a.ows}${f.value}${a.trailingOws}${a.eol}`;
  out += a.eol;
  if (a.framing !== 'chunked') return out + a.body + a.after;
  const half = a.body.length >> 1;
  for (const part of [a.body.slice(0, half), a.body.slice(half)]) if (part !== '') out += `${part.length.toString(16)}${a.chunkExt}\r\n${part}\r\n`;
  return `${out}0\r\n${a.trailers}\r\n${a.after}`;
}

interface Case {
  text: string;
  cuts: number[];
  head: boolean;
}

const cases: fc.Arbitrary<Case> = fc
  .record({
    answer: fc.oneof({ arbitrary: answers(undefined), weight: 2 }, { arbitrary: fc.constantFrom(...ODD_PLACES).chain(answers), weight: 2 }),
    mutations,
    big: fc.oneof({ arbitrary: fc.constant(0), weight: 12 }, { arbitrary: pick(MAX_HEAD / 2, MAX_HEAD * 2), weight: 1 }),
    head: fc.oneof({ arbitrary: fc.constant(false), weight: 5 }, { arbitrary: fc.constant(true), weight: 1 }),
    cuts,
  })
  .map(({ answer, mutations, big, head, cuts }) => {
    let text = serialize(answer);
    // A head well under or well over the limit: a large field first (both count a head's bytes a little differently).
    if (big > 0) text = text.replace(/\r\n/, `\r\nX-Big: ${'b'.repeat(big)}\r\n`);
    text = mutate(text, mutations);
    return { text, head, cuts };
  });

/** The heads of the interim 1xx answers (101 is none) and of the answer itself, in order. */
function heads(text: string): string[] {
  const out: string[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    out.push(end === -1 ? rest : rest.slice(0, end + 2));
    if (end === -1 || !/^HTTP\/1\.[01] 1(?!01)[0-9]{2}/.test(rest)) return out;
    rest = rest.slice(end + 4);
  }
}

/**
 * Where the parser differs from llhttp by design (ADR 0019, ADR 0043), by what the heads hold:
 * it takes identical repeated Content-Length values as one (RFC 9110 §8.6), where llhttp
 * refuses them; it refuses what llhttp takes but a replica never sends and the router cannot
 * forward: a protocol switch, a version other than HTTP/1.0 and 1.1 or a status below 100, an
 * empty line before a status line (RFC 9112 allows skipping one only before a request), a
 * control character in a reason phrase, a Content-Length of 16 digits or more (past 2^53), and
 * a Transfer-Encoding line whose trailing whitespace holds a tab (llhttp then reads the
 * answer as not chunked).
 */
const BY_DESIGN: { takes: 'owned' | 'llhttp'; when: (head: string) => boolean }[] = [
  { takes: 'owned', when: repeatsLength },
  { takes: 'llhttp', when: (head) => /^HTTP\/1\.[01] 101/.test(head) },
  { takes: 'llhttp', when: (head) => /^HTTP\/(?!1\.[01] )|^HTTP\/1\.[01] 0/.test(head) },
  { takes: 'llhttp', when: (head) => /^[\r\n]/.test(head) },
  // eslint-disable-next-line no-control-regex -- a control character in the status line is the case
  { takes: 'llhttp', when: (head) => /^[^\r\n]*[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/.test(head) },
  { takes: 'llhttp', when: (head) => /\r\ncontent-length:[ \t]*[0-9]{16}/i.test(head) },
  { takes: 'llhttp', when: (head) => /\r\ntransfer-encoding:[^\r]*\t[ \t]*\r\n/i.test(head) },
];

/** The head has more than one Content-Length field, or one with a list of values. */
function repeatsLength(head: string): boolean {
  const values = [...head.matchAll(/\r\ncontent-length:([^\r]*)/gi)].map((m) => m[1] as string);
  return values.length > 1 || values.some((v) => v.includes(','));
}

/** Whether `mine` and `theirs` differ only where BY_DESIGN says the parser does, in some head. */
function differsByDesign(text: string, mine: Outcome, theirs: Outcome): boolean {
  const taker = mine.end !== 'refused' && theirs.end === 'refused' ? 'owned' : mine.end === 'refused' && theirs.end !== 'refused' ? 'llhttp' : undefined;
  return taker !== undefined && heads(text).some((head) => BY_DESIGN.some((d) => d.takes === taker && d.when(head)));
}

describe('ResponseParser against node:http (llhttp)', () => {
  it(
    'takes, refuses and cuts the same answers, with the same status, fields and body, for any byte stream',
    async () => {
      const property = fc.asyncProperty(cases, async (c) => {
        const chunks = writesOf(c.text, c.cuts);
        const mine = owned(chunks, c.head);
        const theirs = await llhttp(chunks, c.head);
        if (differsByDesign(c.text, mine, theirs)) return;
        expect({ stream: c.text, ...mine }).toEqual({ stream: c.text, ...theirs });
      });
      await checkSeeded(property, SEED, RUNS, TIME_LIMIT_MS);
    },
    TIME_LIMIT_MS + 20_000,
  );
});
