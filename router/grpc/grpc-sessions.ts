import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import { connect as netConnect } from 'node:net';
import type { RouteState } from '../discovery/discovery.js';

/** The bounds of the router's HTTP/2 connections to the replicas' gRPC ports (docs/limits.md). */
export interface GrpcSessionLimits {
  /** A connection not established this long is given up: its tries fail and the next one dials anew. */
  connectTimeoutMs: number;
  /** Streams the router opens at once on one connection; more open another connection (at most `maxSessions`). */
  maxStreamsPerSession: number;
  maxSessions: number;
}

interface PooledSession {
  readonly session: ClientHttp2Session;
  streams: number;
  /** GOAWAY received, closing, or closed: takes no new stream. */
  gone: boolean;
}

/**
 * The HTTP/2 connections to one replica's gRPC port (node:http2 client sessions), reused by every
 * call the router forwards there: a call is one stream on the least busy open connection. A
 * connection the replica sends away (GOAWAY, its idle timeout or drain) or that closes takes no
 * new stream, lets its streams end, and is replaced by a new one at the next call.
 */
export class ReplicaSessions {
  private readonly sessions: PooledSession[] = [];
  private closed = false;
  /**
   * The replica answered the internal HTTP/1.1 form 404 (an older version, ADR 0054): its calls
   * take this HTTP/2 upstream from then on, as long as it stays at this address.
   */
  servesHttp1Form = true;

  constructor(
    readonly address: string,
    private readonly limits: GrpcSessionLimits,
  ) {}

  /** Opens a stream with `headers` (no body yet) on a pooled connection; it fails through the stream's own `error`. */
  request(headers: OutgoingHttpHeaders): ClientHttp2Stream {
    if (this.closed) throw new Error('the replica left the route');
    const pooled = this.pick();
    pooled.streams++;
    const stream = pooled.session.request(headers, { endStream: false });
    stream.once('close', () => {
      pooled.streams--;
    });
    return stream;
  }

  close(): void {
    this.closed = true;
    for (const p of this.sessions) {
      p.gone = true;
      // The calls under way end on their own; the connection closes after them.
      p.session.close();
    }
    this.sessions.length = 0;
  }

  private pick(): PooledSession {
    let best: PooledSession | undefined;
    for (const p of this.sessions) if (!p.gone && (best === undefined || p.streams < best.streams)) best = p;
    if (best !== undefined && (best.streams < this.limits.maxStreamsPerSession || this.sessions.length >= this.limits.maxSessions)) return best;
    return this.open();
  }

  private open(): PooledSession {
    const url = new URL(`http://${this.address}`);
    const session = connect(url, {
      settings: { enablePush: false },
      // A call's frames go out at once, not held back by Nagle's algorithm for the previous call's ACK.
      createConnection: () => netConnect({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port), noDelay: true }),
    });
    const pooled: PooledSession = { session, streams: 0, gone: false };
    this.sessions.push(pooled);
    const forget = (): void => {
      pooled.gone = true;
      const i = this.sessions.indexOf(pooled);
      if (i >= 0) this.sessions.splice(i, 1);
    };
    const timer = setTimeout(() => {
      session.destroy(new Error(`no connection to ${this.address} within ${this.limits.connectTimeoutMs} ms`), constants.NGHTTP2_CANCEL);
    }, this.limits.connectTimeoutMs);
    timer.unref();
    session.once('connect', () => clearTimeout(timer));
    session.once('goaway', forget);
    session.once('close', () => {
      clearTimeout(timer);
      forget();
    });
    // A connection's error reaches each of its streams, whose tries answer it.
    session.on('error', () => undefined);
    // An idle pooled connection does not keep the process up.
    session.unref();
    return pooled;
  }
}

/**
 * The replicas that serve gRPC, by name, each with its pooled connections, kept in step with the
 * discovery snapshots as the route table keeps its HTTP pools. A replica that leaves, or moves
 * to another address, has its connections closed once their calls end.
 */
export class GrpcSessions {
  private readonly replicas = new Map<string, ReplicaSessions>();

  constructor(private readonly limits: GrpcSessionLimits) {}

  get(replica: string): ReplicaSessions | undefined {
    return this.replicas.get(replica);
  }

  apply(states: readonly RouteState[]): void {
    const seen = new Map<string, string>();
    for (const s of states) for (const r of s.replicas) if (r.grpc !== undefined) seen.set(r.name, r.grpc);
    for (const [name, r] of this.replicas) {
      if (seen.get(name) === r.address) continue;
      r.close();
      this.replicas.delete(name);
    }
    for (const [name, address] of seen) if (!this.replicas.has(name)) this.replicas.set(name, new ReplicaSessions(address, this.limits));
  }

  close(): void {
    for (const r of this.replicas.values()) r.close();
    this.replicas.clear();
  }
}
