import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ERROR_CATALOGUE, type ErrorBody } from '../../common/errors.js';
import { endWithAnswer } from './socket-end.js';

/**
 * The answer to a request that node:http refused, by the error's code: the statuses node:http's
 * own default answers (431 for a head too large, 408 for a request not in by its timeout, 413
 * for chunk extensions too large, 400 for any other parse error), with the router's JSON error
 * body. None for an error of the connection itself (a reset, a failed write): nobody reads it.
 */
export function clientErrorAnswer(err: Error & { code?: unknown }): ErrorBody | undefined {
  const code = typeof err.code === 'string' ? err.code : '';
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { error: 'headers_too_large', message: 'the request head is larger than the router reads' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { error: 'request_timeout', message: 'the request did not arrive in time' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { error: 'body_too_large', message: 'chunk extensions larger than the router reads' };
    default:
      // llhttp's reasons are fixed texts, never bytes of the request.
      return code.startsWith('HPE_') ? { error: 'bad_request', message: `not valid HTTP/1.1: ${err.message.replace(/^Parse Error: /, '')} (${code})` } : undefined;
  }
}

/** The whole response for `body`; the connection closes after it. */
export function clientErrorResponse(body: ErrorBody): string {
  const status = ERROR_CATALOGUE[body.error].status;
  const json = JSON.stringify(body);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\nconnection: close\r\n\r\n${json}`;
}

/**
 * node:http's `clientError` for the router's server: a malformed request gets the documented
 * JSON error body where a response can still be written, and the connection closes after it.
 * node:http itself writes its bare 400 at once, even while the answer to an earlier pipelined
 * request is still to come, which the client then reads as that answer. Here the answers to the
 * requests before the bad one go out first, then the error; when the error is inside a request's
 * body whose answer has already begun, the connection just closes. node:http keeps no public
 * record of its responses per connection, so `track` keeps one for the requests it serves (the
 * fast path's own have all ended before it hands a connection over).
 */
export class ClientErrors {
  private readonly open = new WeakMap<Duplex, Set<ServerResponse>>();
  /** Answers waiting for the responses to the requests before them. */
  private readonly deferred = new WeakMap<Duplex, ErrorBody>();

  track(req: IncomingMessage, res: ServerResponse): void {
    const socket = req.socket;
    let responses = this.open.get(socket);
    if (responses === undefined) this.open.set(socket, (responses = new Set()));
    responses.add(res);
    res.once('close', () => {
      responses.delete(res);
      const body = this.deferred.get(socket);
      if (body !== undefined && !answersEarlier(responses)) {
        this.deferred.delete(socket);
        settle(socket, responses, body);
      }
    });
  }

  readonly onClientError = (err: Error, socket: Duplex): void => {
    // A later parse error on a connection already answered or about to be, or one already gone.
    if (socket.destroyed || socket.writableEnded || this.deferred.has(socket)) return;
    const body = clientErrorAnswer(err);
    if (body === undefined) return void socket.destroy();
    const open = this.open.get(socket) ?? new Set();
    if (answersEarlier(open)) this.deferred.set(socket, body);
    else settle(socket, open, body);
  };
}

/** Some response is for a request read whole: one before the bad bytes, to go out first. */
function answersEarlier(open: ReadonlySet<ServerResponse>): boolean {
  for (const res of open) if (res.req.complete) return true;
  return false;
}

/**
 * Answers the error once nothing before it is to come: in place of the answer to the request
 * whose body held it, unless that answer has begun.
 */
function settle(socket: Duplex, open: ReadonlySet<ServerResponse>, body: ErrorBody): void {
  for (const res of open) if (res.headersSent) return void socket.destroy();
  answer(socket, body);
}

/** Writes the answer and closes; a connection that can no longer be written is left to whoever ended it. */
function answer(socket: Duplex, body: ErrorBody): void {
  if (socket.writable) endWithAnswer(socket, clientErrorResponse(body));
}
