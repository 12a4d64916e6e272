import { constants, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import type { Fields } from './grpc-forward-headers.js';
import { endWithMessage } from '../../common/grpc/grpc-frame.js';
import { responseFields } from '../../common/http2/header-fields.js';
import { splitHttp1Answer } from '../../common/grpc/grpc-http1-form.js';
import type { UpstreamController, UpstreamHandler, UpstreamPool } from '../exchange/upstream-pool.js';
import type { ReplicaSessions } from './grpc-sessions.js';

/**
 * One try of a forwarded gRPC call at a replica, on either upstream (ADR 0054): a stream of a
 * pooled HTTP/2 connection to its gRPC port, or a request of the internal HTTP/1.1 form on the
 * router's pooled connections to its HTTP port. The exchange sees the same four events of both.
 */
export interface GrpcTry {
  /** Stops the try; `closed` follows (at once or later) unless the status came first. */
  cancel(): void;
  pause(): void;
  resume(): void;
}

/** What a try tells its exchange, each with the try, so that a stale try's events are known; headers and trailers as flat fields. */
export interface GrpcTryEvents {
  /** The answer's response headers; a trailers-only answer's carry its grpc-status. */
  response(t: GrpcTry, httpStatus: number, head: Fields): void;
  data(t: GrpcTry, chunk: Buffer): void;
  /** The answer's status, once its last message byte has been read. */
  status(t: GrpcTry, trailers: Fields): void;
  /** The try ended without (or after) its status; `reason` when it broke. */
  closed(t: GrpcTry, reason: string): void;
  /** The replica does not serve the HTTP/1.1 form (it answered 404, before any answer byte): the try is over. */
  formUnserved(t: GrpcTry): void;
}

/** The try as one stream of a pooled HTTP/2 connection to the replica's gRPC port (grpc-sessions.ts). */
export class Http2Try implements GrpcTry {
  private stream: ClientHttp2Stream | undefined;

  constructor(private readonly events: GrpcTryEvents) {}

  /** Opens the stream and sends the message; throws when the replica has just left the route. */
  send(sessions: ReplicaSessions, headers: OutgoingHttpHeaders, message: Buffer): void {
    const upstream = sessions.request(headers);
    this.stream = upstream;
    const ev = this.events;
    let failure: Error | undefined;
    upstream.on('error', (err: Error) => {
      failure = err;
    });
    upstream.once('response', (h: IncomingHttpHeaders) => ev.response(this, Number(h[':status']), responseFields(h)));
    upstream.on('data', (chunk: Buffer) => ev.data(this, chunk));
    // The trailers can come while message bytes still wait in the paused stream: the status is
    // taken once the last of them has been read ('end').
    let trailers: IncomingHttpHeaders | undefined;
    upstream.once('trailers', (t: IncomingHttpHeaders) => {
      trailers = t;
    });
    upstream.once('end', () => {
      if (trailers !== undefined) ev.status(this, responseFields(trailers));
    });
    upstream.once('close', () => ev.closed(this, failure?.message ?? `the stream closed (${upstream.rstCode ?? 0}) before its status`));
    endWithMessage(upstream, message);
  }

  cancel(): void {
    if (this.stream !== undefined && !this.stream.destroyed) this.stream.close(constants.NGHTTP2_CANCEL);
  }

  pause(): void {
    this.stream?.pause();
  }

  resume(): void {
    this.stream?.resume();
  }
}

/**
 * The try as a request of the internal HTTP/1.1 form (common/grpc/grpc-http1-form.ts) on the
 * router's pooled keep-alive connections to the replica's HTTP port (upstream-pool.ts): the
 * answer's head carries its headers and trailers, its body the length-prefixed message.
 */
export class Http1Try implements GrpcTry, UpstreamHandler {
  private controller: UpstreamController | undefined;
  private trailers: Fields = [];

  constructor(private readonly events: GrpcTryEvents) {}

  /** `headers`: the pool's flat list of names and values (grpc-forward-headers.ts' forwardedFields). */
  send(pool: UpstreamPool, path: string, headers: string[], body: Buffer): void {
    pool.dispatch({ method: 'POST', path, headers, body }, this);
  }

  cancel(): void {
    this.controller?.abort(new Error('the try was cancelled'));
  }

  pause(): void {
    this.controller?.pause();
  }

  resume(): void {
    this.controller?.resume();
  }

  onRequestStart(controller: UpstreamController): void {
    this.controller = controller;
  }

  onResponseStart(controller: UpstreamController, status: number, raw: string[]): void {
    if (status === 404) {
      // A replica without the form answers its HTTP API's 404: the exchange knows the try as over
      // before the abort's error reaches it, which it then takes for a stale try's.
      this.events.formUnserved(this);
      return controller.abort(new Error('the replica does not serve the HTTP/1.1 form of gRPC calls'));
    }
    if (status !== 200) return controller.abort(new Error(`the replica answered HTTP ${status}, not a gRPC answer`));
    const { head, trailers } = splitHttp1Answer(raw);
    this.trailers = trailers;
    this.events.response(this, status, head);
  }

  onResponseData(_controller: UpstreamController, chunk: Buffer): void {
    this.events.data(this, chunk);
  }

  onResponseEnd(): void {
    this.controller = undefined;
    this.events.status(this, this.trailers);
  }

  onResponseError(_controller: UpstreamController, err: Error): void {
    this.controller = undefined;
    this.events.closed(this, err.message);
  }
}
