import type { OutgoingHttpHeaders } from 'node:http2';

/**
 * What a unary call uses of its HTTP/2 stream: node:http2's ServerHttp2Stream has it as it is,
 * and so has the router's own framing (common/http2/server-stream.ts, ADR 0055), so UnaryCall
 * and UnaryServer keep one logic over either.
 */
export interface CallStream {
  readonly destroyed: boolean;
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  /** Answer bytes written to the stream and not yet sent on (held by its flow-control window or its queue). */
  readonly writableLength: number;
  respond(headers: OutgoingHttpHeaders, options?: { endStream?: boolean; waitForTrailers?: boolean }): void;
  /** False when the stream holds more than it should: wait for `drain`. */
  write(chunk: Buffer, cb?: () => void): boolean;
  end(chunk?: Buffer): void;
  sendTrailers(headers: OutgoingHttpHeaders): void;
  /** `respond` with the header block's fields as they go out, pseudo-headers first, where the stream has it (the router's own framing): no header object between. */
  respondFields?(fields: readonly string[], options?: { endStream?: boolean; waitForTrailers?: boolean }): void;
  /** Ends the answer with `fields` as its trailers once its DATA has gone: `end` and a `wantTrailers` listener in one, where the stream has it (the router's own framing). */
  endWithTrailers?(fields: readonly string[]): void;
  /** Resets the stream with `code` (an RST_STREAM error code). */
  close(code?: number): void;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  once(event: 'end' | 'close' | 'drain' | 'wantTrailers', listener: () => void): unknown;
}

/** What a server does with one client connection: node:http2's ServerHttp2Session, or the router's own (server-connection.ts). */
export interface CallSession {
  readonly closed: boolean;
  readonly destroyed: boolean;
  /** GOAWAY: no new calls; the connection closes when its calls have ended. */
  close(): void;
  destroy(): void;
  goaway(code: number): void;
  /** Sends a PING; `cb` hears its ACK (err null) or its loss. False when it could not be sent. */
  ping(cb: (err: Error | null) => void): boolean;
  /**
   * Runs `fn` once every frame of the bytes being read has been handled and the stream events
   * they queued have run (the router's own framing, which reads a socket chunk's frames in one
   * turn). Without it the server waits for the next turn of the event loop (setImmediate), after
   * nghttp2's callbacks for the same read.
   */
  afterRead?(fn: () => void): void;
}
