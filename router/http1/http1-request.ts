import { fieldTokens, headerFields, isFieldLineStart } from './http1-syntax.js';

/** A request head the router's own HTTP/1.1 reader accepted. */
export interface RequestHead {
  method: string;
  /** Origin-form target, as sent. */
  url: string;
  /** Flat `[name, value, …]` as sent, like node's `req.rawHeaders`. */
  rawHeaders: string[];
  /** 0 when the request has no Content-Length. */
  contentLength: number;
  /** The client asked to close the connection after this response. */
  close: boolean;
}

export type HeadScan =
  | { kind: 'incomplete' }
  /** Not in the subset read here: node:http takes the connection over (and answers errors). */
  | { kind: 'other'; reason: string }
  | { kind: 'head'; head: RequestHead; bytes: number };

const HEAD_END = Buffer.from('\r\n\r\n');
/** The methods read here; the request line's own copy of the name is not kept. */
const METHODS = ['GET', 'POST', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const VERSION = ' HTTP/1.1';
/** Origin-form: a slash, then visible ASCII. */
const TARGET = /^\/[\x21-\x7e]*$/;
const INCOMPLETE: HeadScan = { kind: 'incomplete' };

/** The method of a request line `METHOD SP target`, if it is one read here. */
function methodOf(line: string): string | undefined {
  const sp = line.indexOf(' ');
  for (const m of METHODS) if (m.length === sp && line.startsWith(m)) return m;
  return undefined;
}

/** The target of a request line `METHOD SP target SP HTTP/1.1` read here, else ''. */
function targetOf(line: string): string {
  const method = methodOf(line);
  if (method === undefined || !line.endsWith(VERSION)) return '';
  const url = line.slice(method.length + 1, line.length - VERSION.length);
  return TARGET.test(url) ? url : '';
}

/** Whether `line`, with no CRLF yet, is the start of a request line read here. */
function isRequestLineStart(line: string): boolean {
  const sp = line.indexOf(' ');
  if (sp === -1) return METHODS.some((m) => m.startsWith(line));
  if (methodOf(line) === undefined) return false;
  const sp2 = line.indexOf(' ', sp + 1);
  if (sp2 === -1) return sp + 1 === line.length || TARGET.test(line.slice(sp + 1));
  return TARGET.test(line.slice(sp + 1, sp2)) && 'HTTP/1.1\r'.startsWith(line.slice(sp2 + 1));
}

/**
 * Whether `text`, a head whose blank line has not come yet, can still become one read here: a
 * request line or its start, then field lines in the subset and the start of one. node:http
 * refuses a malformed head at its first bad byte or line; waiting for the blank line instead
 * would leave the client without an answer until the head timeout (a bare-LF head never has the
 * CRLF blank line looked for).
 */
function isPlainHeadStart(text: string): boolean {
  const eol = text.indexOf('\r\n');
  if (eol === -1) return isRequestLineStart(text);
  if (targetOf(text.slice(0, eol)) === '') return false;
  const block = text.slice(eol + 2);
  const last = block.lastIndexOf('\r\n');
  if (!isFieldLineStart(last === -1 ? block : block.slice(last + 2))) return false;
  if (last === -1) return true;
  try {
    return outsideSubset(headerFields(block.slice(0, last)), undefined) === undefined;
  } catch {
    return false;
  }
}

/**
 * Why a request's fields are outside the subset read here, if they are; else fills `head`'s
 * length and close flag. The fields of a head not yet whole (`head` undefined) may still get
 * their Host.
 */
function outsideSubset(rawHeaders: readonly string[], head: RequestHead | undefined): string | undefined {
  let hosts = 0;
  let contentLength = -1;
  let close = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const value = rawHeaders[i + 1] as string;
    switch (name.toLowerCase()) {
      case 'host':
        hosts++;
        break;
      case 'content-length':
        if (contentLength !== -1 || !/^[0-9]{1,15}$/.test(value)) return 'Content-Length repeated or not a number';
        contentLength = Number(value);
        break;
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
        return `${name} header`;
      case 'connection':
        // What nearly every client sends needs no tokenising.
        if (value === 'keep-alive') break;
        for (const token of fieldTokens(value)) {
          if (token === 'close') close = true;
          else if (token === 'upgrade') return 'Connection: upgrade';
        }
        break;
    }
  }
  if (hosts > 1 || (hosts === 0 && head !== undefined)) return 'Host missing or repeated';
  if (head === undefined) return undefined;
  // llhttp reads no body after a HEAD request whatever its Content-Length says (RFC 9112 would
  // read one): the bytes are the next request to node:http, so they are read by its rules.
  if (head.method === 'HEAD' && contentLength > 0) return 'HEAD with a body';
  head.contentLength = Math.max(0, contentLength);
  head.close = close;
  return undefined;
}

function other(reason: string): HeadScan {
  return { kind: 'other', reason };
}

/**
 * Reads a request head at the start of `buf` if it is in the plain subset that the proxy's hot
 * path serves: an HTTP/1.1 request line with a known method and an origin-form target, one
 * Host, at most one Content-Length, and no Transfer-Encoding, Expect or Upgrade. Anything else,
 * malformed or merely unusual, is `other`: the connection goes to node:http, which serves
 * it or answers the error, so this reader never has to decide a hard case (ADR 0019). Pure.
 */
export function scanRequestHead(buf: Buffer, maxHeadBytes: number): HeadScan {
  const end = buf.indexOf(HEAD_END);
  if (end === -1) {
    if (buf.length > maxHeadBytes) return other('head too large');
    return isPlainHeadStart(buf.toString('latin1')) ? INCOMPLETE : other('the start of a head not read here');
  }
  if (end + 4 > maxHeadBytes) return other('head too large');
  const text = buf.toString('latin1', 0, end);
  const eol = text.indexOf('\r\n');
  const line = eol === -1 ? text : text.slice(0, eol);
  const url = targetOf(line);
  if (url === '') return other('not a plain HTTP/1.1 request line');
  let rawHeaders: string[];
  try {
    rawHeaders = headerFields(eol === -1 ? '' : text.slice(eol + 2));
  } catch {
    return other('malformed header line');
  }
  const head: RequestHead = { method: methodOf(line) as string, url, rawHeaders, contentLength: 0, close: false };
  const outside = outsideSubset(rawHeaders, head);
  return outside === undefined ? { kind: 'head', head, bytes: end + 4 } : other(outside);
}
