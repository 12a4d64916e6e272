import { ProtocolError, TOKEN_CHAR, VALUE_CHAR, fieldTokens, hasBadHeadByte, headerFields, splitHeaderLine } from '../http1/http1-syntax.js';

/** What a parsed response head says about the body and the connection. */
export interface ResponseHead {
  status: number;
  /** Flat `[name, value, …]` in the order received, names lowercased, repeated fields repeated. */
  headers: string[];
  /** The connection may carry another request after this response. */
  reusable: boolean;
  /** The server's `Keep-Alive: timeout=N`, in ms, if it sent one. */
  keepAliveMs: number | undefined;
}

export interface ResponseSink {
  onHead(head: ResponseHead): void;
  onBody(chunk: Buffer): void;
  onComplete(): void;
}

type State = 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-crlf' | 'trailers' | 'until-close' | 'done';

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');
/** A chunk extension's value: a token or a quoted string without escapes (llhttp takes no quoted-pair). */
const EXT_VALUE = `(?:${TOKEN_CHAR}*|"[\\t !#-\\[\\]-~\\x80-\\xff]*")`;
/**
 * A chunk-size line: hex digits, then extensions (ignored) as llhttp reads them: `;name`,
 * `;name=value` or `;=value`, no whitespace anywhere. A line llhttp would refuse is refused, so
 * that the two never frame a body differently (test/unit/router/http1-response-differential.test.ts).
 */
const CHUNK_SIZE = new RegExp(`^([0-9A-Fa-f]{1,15})(?:;(?:${TOKEN_CHAR}+(?:=${EXT_VALUE})?|=${EXT_VALUE}))*$`);
/** The status line; its reason phrase as RFC 9112 §4 allows it, no control character but tab. */
const STATUS_LINE = new RegExp(`^HTTP\\/1\\.([01]) ([1-9][0-9]{2})(?: ${VALUE_CHAR}*)?$`);
/** A Transfer-Encoding line whose trailing whitespace holds a tab: llhttp reads it as not chunked where the trimmed value says chunked. */
const TE_TRAILING_TAB = /\r\ntransfer-encoding:[^\r]*\t[ \t]*\r\n/i;

/**
 * Incremental HTTP/1.1 response parser for the router's upstream connections (RFC 9112): status
 * line and header block, then a body framed by Content-Length, chunked coding or the end of the
 * connection. Strict where a lenient reading could desynchronise the connection: both
 * Content-Length and Transfer-Encoding, differing Content-Lengths, folded header lines, bare-LF
 * line ends, a head larger than the limit and bytes after a complete response are protocol
 * errors; identical Content-Lengths are collapsed into one. Pure: it never touches a socket,
 * the caller feeds bytes and reads the sink's calls.
 */
export class ResponseParser {
  private state: State = 'head';
  private buf: Buffer | null = null;
  private remaining = 0;
  private noBody = false;

  constructor(
    private readonly sink: ResponseSink,
    private readonly maxHeadBytes: number,
  ) {}

  /** Starts a new response; `headRequest` responses have no body whatever their headers say. */
  reset(headRequest: boolean): void {
    this.state = 'head';
    this.buf = null;
    this.remaining = 0;
    this.noBody = headRequest;
  }

  get complete(): boolean {
    return this.state === 'done';
  }

  /** The body runs to the end of the connection (no length, not chunked). */
  get untilClose(): boolean {
    return this.state === 'until-close';
  }

  /**
   * Feeds bytes; calls the sink; throws ProtocolError on a malformed response. Nothing keeps a
   * view of `data` after this returns, so the caller may reuse it (the sink's `onBody` chunks
   * are views too: a sink copies what it keeps).
   */
  execute(data: Buffer): void {
    let chunk: Buffer | null = this.buf === null ? data : Buffer.concat([this.buf, data]);
    this.buf = null;
    while (chunk !== null && chunk.length > 0) chunk = this.step(chunk);
  }

  /** The connection ended: completes a body that runs to the close, else it was cut. */
  end(): void {
    if (this.state === 'until-close') {
      this.state = 'done';
      this.sink.onComplete();
      return;
    }
    if (this.state !== 'done') throw new ProtocolError(this.state === 'head' && this.buf === null ? 'closed before a response' : 'the response was cut off');
  }

  /** Consumes a prefix of `data`; returns what is left for the next state (null: wait for more). */
  private step(data: Buffer): Buffer | null {
    switch (this.state) {
      case 'head':
        return this.head(data);
      case 'length': {
        const n = Math.min(this.remaining, data.length);
        this.remaining -= n;
        this.sink.onBody(n === data.length ? data : data.subarray(0, n));
        if (this.remaining === 0) this.done();
        return n === data.length ? null : data.subarray(n);
      }
      case 'chunk-size': {
        const eol = data.indexOf(CRLF);
        if (eol === -1) {
          if (data.indexOf(10) !== -1) throw new ProtocolError('bad chunk size line');
          return this.keep(data, 1024, 'chunk size line too long');
        }
        const m = CHUNK_SIZE.exec(data.toString('latin1', 0, eol));
        if (m === null) throw new ProtocolError('bad chunk size line');
        this.remaining = parseInt(m[1] as string, 16);
        this.state = this.remaining === 0 ? 'trailers' : 'chunk-data';
        return data.subarray(eol + 2);
      }
      case 'chunk-data': {
        const n = Math.min(this.remaining, data.length);
        this.remaining -= n;
        this.sink.onBody(n === data.length ? data : data.subarray(0, n));
        if (this.remaining === 0) this.state = 'chunk-crlf';
        return n === data.length ? null : data.subarray(n);
      }
      case 'chunk-crlf': {
        if (data.length < 2) return this.keep(data, 2, '');
        if (data[0] !== 13 || data[1] !== 10) throw new ProtocolError('chunk data not followed by CRLF');
        this.state = 'chunk-size';
        return data.subarray(2);
      }
      case 'trailers': {
        // Trailer fields are not forwarded, but a malformed one is refused as in the head.
        const eol = data.indexOf(CRLF);
        if (eol === -1) return this.keep(data, this.maxHeadBytes, 'trailers too large');
        if (eol === 0) {
          this.done();
          return data.subarray(2);
        }
        splitHeaderLine(data.toString('latin1', 0, eol));
        return data.subarray(eol + 2);
      }
      case 'until-close':
        this.sink.onBody(data);
        return null;
      case 'done':
        throw new ProtocolError('bytes after the end of the response');
    }
  }

  private head(data: Buffer): Buffer | null {
    const end = data.indexOf(HEAD_END);
    if (end === -1) {
      if (hasBadHeadByte(data)) throw new ProtocolError('a bare CR or LF, or a control character, in the response head');
      return this.keep(data, this.maxHeadBytes, 'response head too large');
    }
    if (end + 4 > this.maxHeadBytes) throw new ProtocolError('response head too large');
    const text = data.toString('latin1', 0, end);
    const eol = text.indexOf('\r\n');
    const m = STATUS_LINE.exec(eol === -1 ? text : text.slice(0, eol));
    if (m === null) throw new ProtocolError('bad status line');
    const status = Number(m[2]);
    const http10 = m[1] === '0';
    const rest = data.subarray(end + 4);
    const headers = headerFields(eol === -1 ? '' : text.slice(eol + 2));
    if (status < 200) {
      if (status === 101) throw new ProtocolError('unexpected protocol switch');
      // An interim response (100 Continue, 103 Early Hints): the real one follows.
      return rest;
    }
    const f = framingOf(headers, !http10);
    if (f.te !== undefined && f.cl !== undefined) throw new ProtocolError('both Transfer-Encoding and Content-Length');
    if (f.te !== undefined && TE_TRAILING_TAB.test(`${text}\r\n`)) throw new ProtocolError('bad Transfer-Encoding');
    // The client gets one Content-Length: node's client, like llhttp, refuses a repeated one.
    if (f.repeatedLength) collapseContentLength(headers, f.cl as string);
    this.state = this.noBody || status === 204 || status === 304 ? 'done' : this.bodyState(f.te, f.cl === undefined ? -1 : Number(f.cl));
    const reusable = f.reusable && this.state !== 'until-close';
    this.sink.onHead({ status, headers, reusable, keepAliveMs: keepAliveHint(f.keepAlive) });
    if (this.state === 'done') this.sink.onComplete();
    return rest;
  }

  /** How the body is framed: chunked, by its length, to the connection's end, or none. */
  private bodyState(te: string | undefined, length: number): State {
    if (te !== undefined) {
      const codings = te.toLowerCase().split(',');
      return (codings[codings.length - 1] as string).trim() === 'chunked' ? 'chunk-size' : 'until-close';
    }
    if (length > 0) {
      this.remaining = length;
      return 'length';
    }
    return length === -1 ? 'until-close' : 'done';
  }

  private done(): void {
    this.state = 'done';
    this.sink.onComplete();
  }

  /**
   * Keeps a partial unit until more bytes arrive, refusing one that grows past `limit`. A copy:
   * the caller may reuse the buffer it fed (the upstream pool reads into one shared buffer).
   */
  private keep(data: Buffer, limit: number, message: string): null {
    if (data.length > limit) throw new ProtocolError(message);
    this.buf = Buffer.from(data);
    return null;
  }
}

/** What framing and reuse depend on, read in one pass over the fields (names lowercased in place); repeated fields join as a list would. */
interface Framing {
  te: string | undefined;
  cl: string | undefined;
  repeatedLength: boolean;
  keepAlive: string | undefined;
  reusable: boolean;
}

function framingOf(headers: string[], http11: boolean): Framing {
  const f: Framing = { te: undefined, cl: undefined, repeatedLength: false, keepAlive: undefined, reusable: http11 };
  for (let i = 0; i < headers.length; i += 2) {
    const name = (headers[i] as string).toLowerCase();
    const value = headers[i + 1] as string;
    headers[i] = name;
    switch (name) {
      case 'transfer-encoding':
        // No coding at all frames nothing (llhttp refuses it too).
        if (value === '') throw new ProtocolError('bad Transfer-Encoding');
        f.te = f.te === undefined ? value : `${f.te},${value}`;
        break;
      case 'content-length': {
        const length = contentLength(value);
        if (f.cl !== undefined && f.cl !== length) throw new ProtocolError('bad Content-Length');
        f.repeatedLength ||= f.cl !== undefined || length !== value;
        f.cl = length;
        break;
      }
      case 'connection':
        // What a keep-alive server sends on every response needs no tokenising.
        if (value !== 'keep-alive' && fieldTokens(value).includes('close')) f.reusable = false;
        break;
      case 'keep-alive':
        f.keepAlive = f.keepAlive === undefined ? value : `${f.keepAlive},${value}`;
        break;
    }
  }
  return f;
}

/**
 * A Content-Length field value as one decimal, where identical values repeated as a list
 * (`42, 42`) are one (RFC 9110 §8.6 lets a recipient replace them with a single instance).
 * Anything else, differing values included, is a protocol error: the response cannot be framed.
 */
function contentLength(value: string): string {
  if (/^[0-9]{1,15}$/.test(value)) return value;
  const members = value.split(',').map((m) => m.trim());
  const first = members[0] as string;
  if (!/^[0-9]{1,15}$/.test(first) || members.some((m) => m !== first)) throw new ProtocolError('bad Content-Length');
  return first;
}

/** Keeps the first `content-length` field of a flat list, with `value`, and drops the others. */
function collapseContentLength(headers: string[], value: string): void {
  let kept = false;
  let out = 0;
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] === 'content-length') {
      if (kept) continue;
      kept = true;
      headers[i + 1] = value;
    }
    headers[out++] = headers[i] as string;
    headers[out++] = headers[i + 1] as string;
  }
  headers.length = out;
}

/** The last `Keep-Alive` value read and its hint: a replica sends the same one on every response. */
let lastKeepAlive: string | undefined;
let lastKeepAliveMs: number | undefined;

function keepAliveHint(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (value !== lastKeepAlive) {
    const m = /(?:^|[,\s])timeout=([0-9]{1,6})/i.exec(value);
    lastKeepAlive = value;
    lastKeepAliveMs = m === null ? undefined : Number(m[1]) * 1000;
  }
  return lastKeepAliveMs;
}
