import * as fc from 'fast-check';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { DownstreamRequest, DownstreamResponse } from '../../../router/http1/downstream.js';
import { ClientErrors } from '../../../router/http1/client-error.js';
import { FastPath } from '../../../router/http1/fast-path.js';
import { checkSeeded, cuts, mutate, mutations, pick, writesOf } from '../../helpers/http1-fuzz.js';

/**
 * The guard ADR 0019 asks for: the router's own HTTP/1.1 request reader (the fast path) must
 * forward exactly what node:http (llhttp) would. The same byte streams, valid and near-valid and
 * split into several writes, go to a server with the fast path and to one without; each handler
 * records the requests it gets. Any difference in the requests accepted (method, target, header
 * fields as received, body), in the error statuses answered, or in how the connection ends
 * (closed before more bytes came, or only after) fails the test with the seed that reproduces it.
 *
 * HTTP1_FUZZ_SEED picks another seed (the default is fixed, so CI runs the same cases each time);
 * HTTP1_FUZZ_RUNS another number of cases.
 */

const SEED = Number(process.env['HTTP1_FUZZ_SEED'] ?? 20261204);
const RUNS = Number(process.env['HTTP1_FUZZ_RUNS'] ?? 250);
/** Both servers read heads of at most this much, as the router's two readers do at 16 KiB. */
const MAX_HEAD = 1024;
/** Ends every stream: once a handler sees it, everything sent before it has been read. */
const SENTINEL_BYTES = Buffer.from('GET /--end HTTP/1.1\r\nHost: s\r\n\r\n');
/** How long node:http gets to close a connection on the bytes before the sentinel. */
const EARLY_CLOSE_MS = 20;
/** A connection that neither reaches the sentinel nor closes by then is stalled (a body waits for bytes). */
const STALL_MS = 1500;
/** New cases start until then: the test stays well within CI's time. */
const TIME_LIMIT_MS = 25_000;

interface Received {
  method: string;
  url: string;
  rawHeaders: string[];
  body: string;
  /** The body ended (its `end` came), not cut off by the connection's close. */
  complete: boolean;
}

interface Outcome {
  requests: Received[];
  /** Statuses the server answered itself (the handler answers 200 to everything). */
  errors: number[];
  end: 'sentinel' | 'closed' | 'stalled';
}

/** What one server's handler got on one connection, keyed by the client's port. */
class Recorder {
  private readonly byPort = new Map<number, { requests: Received[]; pending: Set<Received>; sentinel: () => void }>();

  expect(port: number, onSentinel: () => void): Received[] {
    const requests: Received[] = [];
    this.byPort.set(port, { requests, pending: new Set(), sentinel: onSentinel });
    return requests;
  }

  forget(port: number): void {
    this.byPort.delete(port);
  }

  readonly handle = (req: DownstreamRequest, res: DownstreamResponse): void => {
    const conn = this.byPort.get((req.socket as Socket).remotePort ?? 0);
    const r: Received = { method: req.method ?? '', url: req.url ?? '', rawHeaders: [...req.rawHeaders], body: '', complete: false };
    conn?.requests.push(r);
    conn?.pending.add(r);
    req.on('data', (chunk: Buffer) => void (r.body += chunk.toString('latin1')));
    req.on('end', () => {
      r.complete = true;
      conn?.pending.delete(r);
      res.writeHead(200, ['content-type', 'text/plain']).end('ok');
      if (conn !== undefined && r.url === '/--end' && conn.pending.size === 0) conn.sentinel();
    });
  };
}

interface Side {
  server: Server;
  port: number;
  recorder: Recorder;
  fast: FastPath | undefined;
}

/**
 * A server as the router sets one up (router/http1/server.ts), with a smaller head limit: its
 * clientError handler on both sides, as node:http's default answers a bad request pipelined
 * behind another at once, before that other's answer, where the fast path has answered it first.
 */
async function side(withFastPath: boolean): Promise<Side> {
  const recorder = new Recorder();
  const errors = new ClientErrors();
  const server = createServer({ keepAliveTimeout: 65_000, headersTimeout: 60_000, maxHeaderSize: MAX_HEAD, requestTimeout: 0 }, (req, res) => {
    errors.track(req, res);
    recorder.handle(req, res);
  });
  server.on('clientError', errors.onClientError);
  const fast = withFastPath ? new FastPath(server, recorder.handle, { maxHeadBytes: MAX_HEAD, keepAliveTimeoutMs: 65_000, headersTimeoutMs: 60_000 }) : undefined;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, recorder, fast };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One client connection to one side: writes, then how the server took them. */
class Client {
  readonly socket: Socket;
  private received = '';
  private end: Outcome['end'] | undefined;
  private requests: Received[] = [];
  private wake: () => void = () => undefined;
  private readonly settled = new Promise<void>((r) => (this.wake = r));

  private constructor(private readonly side: Side) {
    this.socket = connect({ port: side.port, host: '127.0.0.1' });
    this.socket.setEncoding('latin1');
    this.socket.on('data', (d: string) => void (this.received += d));
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => this.settle('closed'));
  }

  static async open(side: Side): Promise<Client> {
    const c = new Client(side);
    await new Promise<void>((resolve, reject) => c.socket.once('connect', resolve).once('error', reject));
    c.requests = side.recorder.expect(c.socket.localPort as number, () => c.settle('sentinel'));
    return c;
  }

  get closed(): boolean {
    return this.end === 'closed';
  }

  /** Resolves when the server has closed the connection, or after `ms`. */
  async closedWithin(ms: number): Promise<void> {
    await Promise.race([this.settled, sleep(ms)]);
  }

  async send(chunks: readonly Buffer[]): Promise<void> {
    for (const chunk of chunks) {
      if (this.socket.destroyed) return;
      await new Promise<void>((r) => this.socket.write(chunk, () => r()));
      // Apart, so that the server reads them apart (most of the time: a loaded machine may merge them).
      await sleep(1);
    }
  }

  /** How the server took what was sent: reached the sentinel, closed, or neither within STALL_MS. */
  async outcome(): Promise<Outcome> {
    const timer = setTimeout(() => this.settle('stalled'), STALL_MS);
    await this.settled;
    clearTimeout(timer);
    // Body `end` events and closes still queued behind the sentinel's or the close's.
    await sleep(5);
    this.socket.destroy();
    this.side.recorder.forget(this.socket.localPort as number);
    return { requests: this.requests, errors: errorStatuses(this.received), end: this.end as Outcome['end'] };
  }

  private settle(end: Outcome['end']): void {
    this.end ??= end;
    this.wake();
  }
}

/**
 * Sends the same writes to both sides. Where node:http closes the connection before the
 * sentinel (it refused the bytes, or was asked to close), the fast path must close too without
 * it: one that waits for more bytes where node:http has answered (a bare-LF head) stalls. Else
 * both get the sentinel, and whatever they wait for ends there.
 */
async function runBoth(chunks: readonly Buffer[]): Promise<[Outcome, Outcome]> {
  const [a, b] = await Promise.all([Client.open(fast), Client.open(node)]);
  await Promise.all([a.send(chunks), b.send(chunks)]);
  await b.closedWithin(EARLY_CLOSE_MS);
  if (!b.closed) await Promise.all([a.send([SENTINEL_BYTES]), b.send([SENTINEL_BYTES])]);
  return Promise.all([a.outcome(), b.outcome()]);
}

/**
 * The statuses other than the handler's 200 and interim 1xx in what a client reads, up to the
 * response that says the connection closes: a client reads nothing after it (RFC 9112 §9.6),
 * and node:http does write a 400 there when more bytes follow a `Connection: close` request.
 */
function errorStatuses(received: string): number[] {
  const out: number[] = [];
  for (const m of received.matchAll(/HTTP\/1\.[01] ([0-9]{3}) [^\r\n]*\r\n((?:[^\r\n]+\r\n)*)\r\n/g)) {
    const status = Number(m[1]);
    if (status !== 200 && status >= 200) out.push(status);
    if (/^connection: *close\r$/im.test(m[2] as string)) break;
  }
  return out;
}

// ---- generators: requests as near-valid text, then byte mutations, then a split into writes ----

interface Field {
  name: string;
  value: string;
}

interface Message {
  method: string;
  sp1: string;
  target: string;
  sp2: string;
  version: string;
  hosts: number;
  /** The values of the Content-Length fields. */
  lengths: string[];
  fields: Field[];
  colonSpace: string;
  ows: string;
  trailingOws: string;
  /** A field line with an obs-fold continuation, at this field index (or none). */
  fold: number;
  eols: string[];
  body: string;
  chunked: boolean;
  chunkExt: string;
}

/** Plain messages are valid throughout; odd ones not in one place; framing ones play with the framing fields. */
type Kind = 'plain' | 'odd' | 'framing';

/** The choices an odd message may get wrong, one of them per message. */
const ODD_PLACES = ['method', 'sp1', 'target', 'sp2', 'version', 'hosts', 'name', 'value', 'colon', 'fold', 'eol', 'chunk'] as const;
type OddPlace = (typeof ODD_PLACES)[number];

/**
 * Messages of one kind. A plain one takes a valid value at every choice (still varied: methods,
 * targets, field values, whitespace, bodies, chunked or not); an odd one is plain but for one
 * place, invalid there half the time; a framing one is plain but for its Content-Length,
 * Transfer-Encoding, Connection, Expect and Upgrade fields, invalid half the time.
 */
function messages(kind: Kind): fc.Arbitrary<Message> {
  return kind === 'odd' ? fc.constantFrom(...ODD_PLACES).chain((place) => build(kind, place)) : build(kind, undefined);
}

function build(kind: Kind, oddPlace: OddPlace | undefined): fc.Arbitrary<Message> {
  /** One of `valid`, or, where this message may be odd, as often one of `invalid`. */
  const either = <T>(odd: boolean, valid: readonly T[], invalid: readonly T[]): fc.Arbitrary<T> =>
    odd && invalid.length > 0 ? fc.oneof(fc.constantFrom(...valid), fc.constantFrom(...invalid)) : fc.constantFrom(...valid);
  const choice = <T>(place: OddPlace, valid: readonly T[], invalid: readonly T[]): fc.Arbitrary<T> => either(place === oddPlace, valid, invalid);
  const framing = <T>(valid: readonly T[], invalid: readonly T[]): fc.Arbitrary<T> => either(kind === 'framing', valid, invalid);
  const safeValue = fc.string({ unit: pick('a', 'Z', '0', ' ', ',', ';', '=', '"', '/', ':', '\t', '\x80', '\xff'), maxLength: 12 });
  const oddValue = fc.string({ unit: pick('a', ' ', '\x00', '\x01', '\x7f', '\r', '\n'), minLength: 1, maxLength: 4 });
  const value = oddPlace === 'value' ? fc.oneof(safeValue, oddValue) : safeValue;
  const plainField: fc.Arbitrary<Field> = fc.record({
    name: choice('name', ['X-A', 'x-b', 'Accept', 'Content-Type', 'serve_multiplexed_model_id', "x!#$%&'*+.^_`|~"], ['X Space', 'X\x7f', '\xc9t\xe9', 'X(', 'X"', '', 'X\x00', 'X/']),
    value,
  });
  const connection = fc.record({
    name: framing(['Connection'], ['connection ', 'Connection\t']),
    value: framing(['keep-alive', 'close', 'Close', 'keep-alive, close', 'closed', 'x-a'], ['upgrade', '', 'close\x00', 'close, upgrade']),
  });
  const others = fc.oneof(
    fc.record({
      name: pick('Transfer-Encoding', 'transfer-encoding', 'Transfer_Encoding', 'Transfer-Encoding '),
      value: pick('chunked', 'Chunked', 'chunked, chunked', 'gzip, chunked', 'chunked, gzip', 'identity', ' chunked', 'xchunked', 'chunked,', ''),
    }),
    fc.record({ name: pick('Expect', 'Upgrade', 'expect'), value: pick('100-continue', '100-Continue', 'websocket', 'h2c', 'foo', '') }),
  );
  const framingField: fc.Arbitrary<Field> = kind === 'plain' ? connection : fc.oneof(connection, others);
  const framingFields = kind === 'framing' ? 2 : 1;
  return fc
    .record({
      method: choice('method', ['POST', 'GET', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'], ['TRACE', 'CONNECT', 'PURGE', 'get', 'GETT', 'G\x00ET', 'PRI']),
      sp1: choice('sp1', [' '], ['  ', '\t', '']),
      target: choice(
        'target',
        ['/wine/v2/models/m1/infer', '/', '/a?b=c&d=%20', '//x', "/~!$&'()*+,;=:@", '/invocations?'],
        ['/a#frag', '*', 'http://h/p', '/a b', '/\x7f', '/\xe9', '', '/"<>{}|\\^`', '/a\tb'],
      ),
      sp2: choice('sp2', [' '], ['  ', '\t', '']),
      version: choice('version', ['HTTP/1.1'], ['HTTP/1.0', 'HTTP/1.2', 'HTTP/2.0', 'http/1.1', 'HTTP/1.1 ', 'HTTP/11', 'HTTP/1.1\x00']),
      hosts: choice('hosts', [1], [0, 2]),
      body: fc.string({ unit: pick('a', 'b', '\r', '\n', '0', ' ', '\x00', '\xff'), maxLength: 24 }),
      fields: fc.array(fc.oneof({ arbitrary: plainField, weight: 3 }, { arbitrary: framingField, weight: framingFields }), { maxLength: 4 }),
      colonSpace: choice('colon', [''], [' ', '\t']),
      ows: pick(' ', '', '  ', '\t', ' \t'),
      trailingOws: pick('', ' ', '\t'),
      fold: choice('fold', [-1], [0, 1, 2]),
      eols: fc.array(choice('eol', ['\r\n'], ['\n', '\r', '\r\r\n', '\n\r']), { minLength: 12, maxLength: 12 }),
      chunked: fc.oneof({ arbitrary: fc.constant(false), weight: 4 }, { arbitrary: fc.constant(true), weight: framingFields }),
      chunkExt: choice('chunk', ['', ';a=b', ';a="b c"'], [' ;x', ';\x00']),
      lengthCount: framing([1], [0, 2, 3]),
    })
    .chain(({ lengthCount, ...m }) => {
      const n = m.body.length;
      // A chunked plain message has no Content-Length; others may have both.
      const count = Math.max(0, m.chunked ? lengthCount - 1 : lengthCount);
      const length = framing(
        [String(n)],
        [String(n + 1), String(Math.max(0, n - 1)), `0${n}`, `+${n}`, `-${n}`, `${n}, ${n}`, `${n},${n + 1}`, '', `0x${n.toString(16)}`, '9'.repeat(16), `${n}\x00`, `${n}.0`],
      );
      return fc.array(length, { minLength: count, maxLength: count }).map((lengths) => ({ ...m, lengths }));
    });
}

/** A message as bytes (latin1 text): its own framing fields first, then the others. */
function serialize(m: Message): string {
  let line = 0;
  const nl = (): string => m.eols[line++ % m.eols.length] as string;
  const fields: Field[] = [];
  for (let i = 0; i < m.hosts; i++) fields.push({ name: 'Host', value: i === 0 ? 'x' : 'y' });
  for (const value of m.lengths) fields.push({ name: 'Content-Length', value });
  if (m.chunked) fields.push({ name: 'Transfer-Encoding', value: 'chunked' });
  fields.push(...m.fields);
  let out = `${m.method}${m.sp1}${m.target}${m.sp2}${m.version}${nl()}`;
  fields.forEach((f, i) => {
    out += `${f.name}${i === 0 ? '' : m.colonSpace}:${m.ows}${f.value}${m.trailingOws}`;
    if (i === m.fold) out += `${nl()} folded`;
    out += nl();
  });
  out += nl();
  if (!m.chunked) return out + m.body;
  const half = m.body.length >> 1;
  for (const part of [m.body.slice(0, half), m.body.slice(half)]) if (part !== '') out += `${part.length.toString(16)}${m.chunkExt}\r\n${part}\r\n`;
  return `${out}0\r\n\r\n`;
}

interface Case {
  text: string;
  cuts: number[];
}

const stream: fc.Arbitrary<Case> = fc
  .record({
    messages: fc.array(fc.oneof({ arbitrary: messages('plain'), weight: 2 }, { arbitrary: messages('odd'), weight: 1 }, { arbitrary: messages('framing'), weight: 1 }), { minLength: 1, maxLength: 3 }),
    mutations,
    big: fc.oneof({ arbitrary: fc.constant(0), weight: 12 }, { arbitrary: pick(MAX_HEAD - 120, MAX_HEAD - 60, MAX_HEAD - 40, MAX_HEAD), weight: 1 }),
    cuts,
  })
  .map(({ messages, mutations, big, cuts }) => {
    let text = messages.map(serialize).join('');
    // A head near the limit: a large field in the first message.
    if (big > 0) text = text.replace(/\r\n/, `\r\nX-Big: ${'b'.repeat(big)}\r\n`);
    text = mutate(text, mutations);
    return { text, cuts };
  });

// ---- the property ----

let fast: Side;
let node: Side;
beforeAll(async () => {
  [fast, node] = await Promise.all([side(true), side(false)]);
});
afterAll(async () => {
  for (const s of [fast, node]) {
    s.fast?.closeAll();
    s.server.closeAllConnections();
    await new Promise((r) => s.server.close(r));
  }
});

describe('the fast path against node:http (llhttp)', () => {
  it(
    'forwards the same requests, answers the same errors and ends connections alike, for any byte stream',
    async () => {
      const property = fc.asyncProperty(stream, async (c) => {
        const [a, b] = await runBoth(writesOf(c.text, c.cuts));
        expect({ stream: c.text, ...a }).toEqual({ stream: c.text, ...b });
      });
      await checkSeeded(property, SEED, RUNS, TIME_LIMIT_MS);
    },
    TIME_LIMIT_MS + 20_000,
  );
});
