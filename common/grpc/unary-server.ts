import { constants, createServer as createH2Server, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session } from 'node:http2';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { status } from '@grpc/grpc-js';
import { refusal, type RefusalReason } from '../connection-limits.js';
import { ModelmuxError } from '../errors.js';
import { ServerConnection } from '../http2/server-connection.js';
import { SlotSet } from '../slot-set.js';
import type { CallSession, CallStream } from './call-stream.js';
import { grpcTimeoutMs } from './grpc-timeout.js';
import { UNSERVED_METHODS } from './inference-service.js';
import { grpcStatus } from './status.js';
import { ResetBudget, type ResetPolicy } from './reset-budget.js';
import { UnaryCall, type CallBudget } from './unary-call.js';

/**
 * Every bound of a gRPC server's connections and calls (docs/limits.md has them side by side
 * with HTTP's). Times in ms.
 */
export interface UnaryServerLimits {
  /** Largest request message; past it RESOURCE_EXHAUSTED `body_too_large`, from its 5-byte prefix. */
  maxMessageBytes: number;
  /** Calls open at once on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** Connections open at once, and from one client address; 0: no limit. */
  maxConnections: number;
  maxConnectionsPerClient: number;
  /** A call's message must be whole this long after its headers… */
  messageTimeoutMs: number;
  /** …with no gap between its bytes longer than this. */
  messageIdleTimeoutMs: number;
  /** An answer whose bytes make no progress to its client this long: the call is reset. */
  writeTimeoutMs: number;
  /** A connection with no call this long is closed (GOAWAY). */
  idleTimeoutMs: number;
  /** A connection is asked to go away (GOAWAY) after this long, its calls given `graceMs` to end; 0: never. */
  maxConnectionAgeMs: number;
  graceMs: number;
  /** The server pings a connection this often, and closes one whose ping is not answered within the timeout. */
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
  /** Calls a client may reset before their answer (reset-budget.ts). */
  resets: ResetPolicy;
}

/** Why a connection was closed or refused: the connection limits', or the reset budget's. */
export type GrpcRefusal = RefusalReason | 'resets';

/** Which bound ended a call: the message's total or idle timeout, or its answer's write timeout. */
export type GrpcTimeout = 'message_total' | 'message_idle' | 'write';

export interface UnaryServerEvents {
  /** A connection closed before any frame, or cut for its client's resets. */
  refused(reason: GrpcRefusal, client: string): void;
  timedOut(phase: GrpcTimeout): void;
  /** A call the server answered itself, before any handler: malformed, too large, over the byte budget, timed out. */
  callRefused(method: string, code: status, error: ModelmuxError | undefined): void;
}

/** A handler of one method: it answers `call` (answer, fail), at once or later; a throw is answered INTERNAL. */
export type UnaryHandler = (call: UnaryCall) => void;

export interface UnaryServerOptions {
  /** The handlers, by full path (`/inference.GRPCInferenceService/ModelInfer`). */
  methods: ReadonlyMap<string, UnaryHandler>;
  limits: UnaryServerLimits;
  /** Messages while they arrive and answers until taken count here (shared with HTTP on the router). */
  budget: CallBudget;
  events: UnaryServerEvents;
  /** Names the flag in a listen error. */
  portFlag: string;
  /** Whose HTTP/2 framing serves the connections: nghttp2's (node:http2, the default), or the router's own (common/http2/, ADR 0055). */
  framing?: 'own' | 'nghttp2';
}

interface SessionState {
  readonly session: CallSession;
  readonly client: string;
  readonly socket: Socket;
  readonly openedAt: number;
  streams: number;
  idleSince: number;
  pingSentAt: number | undefined;
  lastPingAt: number;
  goawayAt: number | undefined;
}

/** A call not yet ended, and its connection's state. */
interface OpenCall {
  readonly call: UnaryCall;
  readonly state: SessionState;
  slot: number;
}

/** What a message the reader refused is answered: a catalogue error, or a bare status. */
export function frameRefusal(s: { reason: 'too_large' | 'compressed' | 'trailing_bytes'; length?: number }, maxMessageBytes: number): ModelmuxError | { code: status; details: string } {
  if (s.reason === 'too_large') return new ModelmuxError('body_too_large', `the message is ${s.length ?? 0} bytes, larger than the limit of ${maxMessageBytes} (--max-body-bytes)`);
  // gRPC's answer to a compression it does not take (the router forwards bytes it must read).
  if (s.reason === 'compressed') return { code: status.UNIMPLEMENTED, details: 'the message is compressed; this server takes identity (uncompressed) messages only' };
  return new ModelmuxError('invalid_request', 'a unary call carries one message; more bytes followed it');
}

/** How often a server's one sweep checks its calls' timeouts: a twentieth of the shortest, within 5–100 ms. */
export function sweepEveryMs(shortestTimeoutMs: number): number {
  return Math.max(5, Math.min(100, Math.floor(shortestTimeoutMs / 20)));
}

/** The message timeout a call still reading its message has run past at `now`, with its answer; undefined while it has not. */
export function messageTimedOut(
  now: number,
  openedAt: number,
  lastByteAt: number,
  l: Pick<UnaryServerLimits, 'messageTimeoutMs' | 'messageIdleTimeoutMs'>,
): { phase: GrpcTimeout; error: ModelmuxError } | undefined {
  if (now - openedAt >= l.messageTimeoutMs) return { phase: 'message_total', error: new ModelmuxError('request_timeout', `the call's message did not arrive within ${l.messageTimeoutMs} ms`) };
  if (now - lastByteAt >= l.messageIdleTimeoutMs) return { phase: 'message_idle', error: new ModelmuxError('request_timeout', `no byte of the call's message for ${l.messageIdleTimeoutMs} ms`) };
  return undefined;
}

/** Largest request head (HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE), as the router's HTTP/1.1 head. */
const MAX_HEADER_LIST_BYTES = 16 * 1024;

/**
 * A unary gRPC server on node:http2 (ADR 0039), for the router and the replica alike: HTTP/2 is
 * nghttp2's, the gRPC framing of one length-prefixed message per call is read as it arrives
 * (grpc-frame.ts), so that every phase of a call is bounded as the HTTP/1.1 side's is: the
 * message's bytes count in the byte budget as they come and its size is refused from its prefix,
 * the message has a total and an idle timeout, an answer the client does not take has a write
 * timeout and its bytes count too, calls a client resets before their answer are budgeted per
 * client address across its connections, and a reset call never reaches its handler.
 * Connections are accepted here (without Nagle's delay) and counted against the connection
 * limits before any HTTP/2 frame.
 */
export class UnaryServer {
  private readonly h2: Http2Server;
  private readonly listener: NetServer;
  private readonly sessions = new Map<CallSession, SessionState>();
  /** Calls not yet ended, with their connection's state (a SlotSet, not a Map: common/slot-set.ts). */
  private readonly calls = new SlotSet<'slot', OpenCall>('slot');
  private readonly byClient = new Map<string, number>();
  private readonly resets: ResetBudget;
  private readonly sweeper: NodeJS.Timeout;
  private draining = false;

  constructor(private readonly opts: UnaryServerOptions) {
    const l = opts.limits;
    this.resets = new ResetBudget(l.resets, () => Date.now());
    this.h2 = createH2Server({
      settings: { maxConcurrentStreams: l.maxConcurrentStreams, maxHeaderListSize: MAX_HEADER_LIST_BYTES, enablePush: false },
      maxHeaderListPairs: 128,
      // nghttp2's own bound on what one session buffers (MiB): a backstop only; the byte budget,
      // which sees each call's bytes, is the bound that answers a status.
      maxSessionMemory: Math.max(10, Math.ceil((2 * l.maxMessageBytes) / 1024 ** 2)),
    });
    this.h2.on('session', (s) => this.onSession(s));
    this.h2.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      const state = this.sessions.get(stream.session as ServerHttp2Session);
      if (state === undefined) return void stream.close(constants.NGHTTP2_REFUSED_STREAM);
      this.onStream(stream, headers, state);
    });
    // A session's errors are its connection's: the connection ends, the process does not.
    this.h2.on('sessionError', () => undefined);
    this.listener = createNetServer({ noDelay: true }, (socket) => this.onConnection(socket));
    const shortest = Math.min(l.messageIdleTimeoutMs, l.messageTimeoutMs, l.writeTimeoutMs, l.keepaliveTimeoutMs, l.idleTimeoutMs);
    this.sweeper = setInterval(() => this.sweep(), sweepEveryMs(shortest));
    this.sweeper.unref();
  }

  get connections(): number {
    return this.sessions.size;
  }

  /** Listens on `host:port` (0: a free port); resolves to the bound port. */
  async listen(port: number, host: string): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      const failed = (err: Error): void => {
        const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
        reject(new Error(`cannot serve gRPC on ${address} (${this.opts.portFlag}): ${err.message}`, { cause: err }));
      };
      this.listener.once('error', failed);
      this.listener.listen(port, host, () => {
        this.listener.off('error', failed);
        resolve();
      });
    });
    return (this.listener.address() as AddressInfo).port;
  }

  /** Takes no new connections, sends the open ones GOAWAY and waits for their calls, at most `graceMs`; then cuts the rest. */
  async drain(graceMs: number): Promise<void> {
    this.draining = true;
    this.listener.close();
    for (const session of this.sessions.keys()) session.close();
    const deadline = Date.now() + graceMs;
    while (this.sessions.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const session of this.sessions.keys()) session.destroy();
    clearInterval(this.sweeper);
  }

  private onConnection(socket: Socket): void {
    const client = socket.remoteAddress ?? '';
    if (this.draining) return void socket.destroy();
    const fromClient = this.byClient.get(client) ?? 0;
    // Before any HTTP/2 frame: there is no call to answer a status on, only the connection to close.
    const refused: GrpcRefusal | undefined = this.resets.blocked(client) ? 'resets' : refusal(this.sessions.size, fromClient, this.opts.limits);
    if (refused !== undefined) {
      this.opts.events.refused(refused, client);
      return void socket.destroy();
    }
    this.byClient.set(client, fromClient + 1);
    socket.once('close', () => {
      const left = (this.byClient.get(client) ?? 1) - 1;
      if (left > 0) return void this.byClient.set(client, left);
      this.byClient.delete(client);
      this.resets.forget(client);
    });
    if (this.opts.framing !== 'own') return void this.h2.emit('connection', socket);
    const l = this.opts.limits;
    // The connection's events come from its socket's bytes, after `state` is set.
    const conn = new ServerConnection(
      socket,
      { maxConcurrentStreams: l.maxConcurrentStreams, maxHeaderListBytes: MAX_HEADER_LIST_BYTES, maxMessageBytes: l.maxMessageBytes },
      { stream: (stream, headers) => this.onStream(stream, headers, state), close: () => this.sessions.delete(conn) },
    );
    const state = this.track(conn, socket);
  }

  private onSession(session: ServerHttp2Session): void {
    this.track(session, session.socket);
    session.once('close', () => this.sessions.delete(session));
    session.on('error', () => undefined);
  }

  private track(session: CallSession, socket: Socket): SessionState {
    const now = Date.now();
    const state: SessionState = { session, client: socket.remoteAddress ?? '', socket, openedAt: now, streams: 0, idleSince: now, pingSentAt: undefined, lastPingAt: now, goawayAt: undefined };
    this.sessions.set(session, state);
    return state;
  }

  private onStream(stream: CallStream, headers: IncomingHttpHeaders, state: SessionState): void {
    state.streams++;
    const path = headers[':path'] ?? '';
    if (headers[':method'] !== 'POST') return void this.plain(stream, state, 405);
    if (!(headers['content-type'] ?? '').startsWith('application/grpc')) return void this.plain(stream, state, 415);
    const now = Date.now();
    const timeout = headers['grpc-timeout'];
    const timeoutMs = timeout === undefined ? Number.POSITIVE_INFINITY : typeof timeout === 'string' ? grpcTimeoutMs(timeout) : undefined;
    const call = new UnaryCall(stream, headers, path.slice(path.lastIndexOf('/') + 1), state.client, now + (timeoutMs ?? 0), this.opts.limits.maxMessageBytes, this.opts.budget, now);
    const open: OpenCall = { call, state, slot: -1 };
    this.calls.add(open);
    this.resets.called(state.client);
    stream.once('close', () => this.onClose(open));
    if (timeoutMs === undefined) return this.refuse(call, new ModelmuxError('invalid_request', `the grpc-timeout header "${String(timeout)}" is malformed`));
    const handler = this.opts.methods.get(path);
    if (handler === undefined) return this.refuse(call, status.UNIMPLEMENTED, UNSERVED_METHODS.get(path) ?? `the server does not implement ${path}`);
    stream.on('data', (chunk: Buffer) => this.onData(call, chunk));
    stream.once('end', () => this.onEnd(call, handler, state.session));
  }

  /** Answers a call the server ends itself: a catalogue error (its status and code trailer), or a bare status. */
  private refuse(call: UnaryCall, err: ModelmuxError | status, details = ''): void {
    if (call.phase === 'done' || call.phase === 'writing') return;
    if (typeof err === 'number') {
      call.fail(err, details);
      this.opts.events.callRefused(call.method, err, undefined);
    } else {
      call.failWith(err);
      this.opts.events.callRefused(call.method, grpcStatus(err.code), err);
    }
  }

  /** A request that is not gRPC: an HTTP status, no gRPC status. */
  private plain(stream: CallStream, state: SessionState, code: number): void {
    stream.once('close', () => this.streamEnded(state));
    try {
      stream.respond({ ':status': code }, { endStream: true });
      stream.close(constants.NGHTTP2_NO_ERROR);
    } catch {
      // The stream is gone already.
    }
  }

  private onData(call: UnaryCall, chunk: Buffer): void {
    if (call.phase !== 'message') return;
    call.lastByteAt = Date.now();
    if (!call.take(chunk.length)) return this.refuse(call, this.opts.budget.fullError());
    const s = call.reader.push(chunk);
    if (s.kind === 'refused') {
      const r = frameRefusal(s, this.opts.limits.maxMessageBytes);
      return r instanceof ModelmuxError ? this.refuse(call, r) : this.refuse(call, r.code, r.details);
    }
    if (s.kind === 'complete') {
      call.message = s.message;
      call.framed = s.framed;
    }
  }

  private onEnd(call: UnaryCall, handler: UnaryHandler, session: CallSession): void {
    if (call.phase !== 'message') return;
    if (call.reader.held === 0 || call.reader.announced === undefined || call.message.length !== call.reader.announced) {
      return this.refuse(call, new ModelmuxError('invalid_request', 'the call ended before its request message was whole'));
    }
    call.phase = 'handling';
    // A reset that came with the message's last bytes is read before the handler runs, so a
    // cancelled call is never placed: after the read's last frame, or in the next turn.
    const run = (): void => {
      if (call.phase !== 'handling' || call.cancelled) return;
      try {
        handler(call);
      } catch (err) {
        call.fail(status.INTERNAL, `unexpected server error: ${err instanceof Error ? err.message : String(err)}`);
      }
    };
    if (session.afterRead !== undefined) session.afterRead(run);
    else setImmediate(run);
  }

  private onClose(open: OpenCall): void {
    const { call, state } = open;
    this.calls.delete(open);
    this.streamEnded(state);
    // Unanswered and closed while its connection lives: the client reset it.
    const reset = call.closed() && !state.session.closed && !state.session.destroyed;
    if (!reset || !this.resets.reset(state.client)) return;
    this.opts.events.refused('resets', state.client);
    for (const [s, st] of this.sessions) {
      if (st.client !== state.client) continue;
      // The GOAWAY goes out first: a destroy in the same turn can overtake it.
      s.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM);
      setImmediate(() => s.destroy());
    }
  }

  private streamEnded(state: SessionState): void {
    state.streams--;
    if (state.streams === 0) state.idleSince = Date.now();
  }

  private sweep(): void {
    const now = Date.now();
    const l = this.opts.limits;
    this.calls.forEach(({ call, state }) => {
      const late = call.phase === 'message' ? messageTimedOut(now, call.openedAt, call.lastByteAt, l) : undefined;
      if (late !== undefined) {
        this.opts.events.timedOut(late.phase);
        this.refuse(call, late.error);
      } else if ((call.phase === 'message' || call.phase === 'handling') && now >= call.deadlineAt) {
        call.cancel('deadline');
        this.refuse(call, status.DEADLINE_EXCEEDED, 'Deadline exceeded');
      } else if (call.phase === 'writing') this.checkWrite(call, state, now);
    });
    for (const [session, st] of this.sessions) this.checkSession(session, st, now);
  }

  /**
   * Progress is the answer's own bytes leaving its stream, or, once they all have, the
   * connection's bytes moving (as HTTP's write timeout, nginx's send_timeout): an answer a zero
   * window holds is not kept alive by the PING ACKs of a client that pings and never reads.
   */
  private checkWrite(call: UnaryCall, state: SessionState, now: number): void {
    const written = state.socket.bytesWritten;
    const pending = call.stream.writableLength;
    const left = pending < call.movedPending || (pending === 0 && written !== call.movedBytes);
    call.movedPending = pending;
    // A relayed answer whose bytes the client has all taken waits on its replica, not on the client.
    if (left || call.heldBytes === 0) {
      call.movedBytes = written;
      call.movedAt = now;
      return;
    }
    if (now - call.movedAt < this.opts.limits.writeTimeoutMs) return;
    this.opts.events.timedOut('write');
    call.stream.close(constants.NGHTTP2_CANCEL);
  }

  private checkSession(session: CallSession, st: SessionState, now: number): void {
    const l = this.opts.limits;
    if (st.goawayAt !== undefined) {
      if (now - st.goawayAt >= l.graceMs) session.destroy();
      return;
    }
    if (st.pingSentAt !== undefined) {
      if (now - st.pingSentAt >= l.keepaliveTimeoutMs) session.destroy();
    } else if (now - st.lastPingAt >= l.keepaliveMs) {
      st.pingSentAt = now;
      try {
        session.ping((err) => {
          st.pingSentAt = undefined;
          st.lastPingAt = Date.now();
          if (err !== null) session.destroy();
        });
      } catch {
        session.destroy();
      }
    }
    const idle = st.streams === 0 && now - st.idleSince >= l.idleTimeoutMs;
    const aged = l.maxConnectionAgeMs > 0 && now - st.openedAt >= l.maxConnectionAgeMs;
    if (idle || aged) {
      st.goawayAt = now;
      session.close();
    }
  }
}
