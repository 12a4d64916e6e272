import { fieldTokens, headerFields } from './http1-syntax.js';

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
  if (end === -1) return buf.length > maxHeadBytes ? other('head too large') : INCOMPLETE;
  if (end + 4 > maxHeadBytes) return other('head too large');
  const text = buf.toString('latin1', 0, end);
  const eol = text.indexOf('\r\n');
  const lineEnd = eol === -1 ? text.length : eol;
  const method = methodOf(text);
  const url = method === undefined || !text.startsWith(VERSION, lineEnd - VERSION.length) ? '' : text.slice(method.length + 1, lineEnd - VERSION.length);
  if (!TARGET.test(url)) return other('not a plain HTTP/1.1 request line');
  let rawHeaders: string[];
  try {
    rawHeaders = headerFields(eol === -1 ? '' : text.slice(eol + 2));
  } catch {
    return other('malformed header line');
  }
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
        if (contentLength !== -1 || !/^[0-9]{1,15}$/.test(value)) return other('Content-Length repeated or not a number');
        contentLength = Number(value);
        break;
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
        return other(`${name} header`);
      case 'connection':
        // What nearly every client sends needs no tokenising.
        if (value === 'keep-alive') break;
        for (const token of fieldTokens(value)) {
          if (token === 'close') close = true;
          else if (token === 'upgrade') return other('Connection: upgrade');
        }
        break;
    }
  }
  if (hosts !== 1) return other('Host missing or repeated');
  return { kind: 'head', head: { method: method as string, url, rawHeaders, contentLength: Math.max(0, contentLength), close }, bytes: end + 4 };
}
