import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { refusal, type RefusalReason } from '../../common/connection-limits.js';
import type { ErrorBody } from '../../common/errors.js';
import { clientErrorResponse } from './client-error.js';
import { takeConnectionListener, type ConnectionListener } from './connection-listener.js';
import { endWithAnswer } from './socket-end.js';

export interface ConnectionLimits {
  /** Client connections open at once; 0: no limit. */
  maxConnections: number;
  /** Client connections open at once from one address; 0: no limit. */
  maxConnectionsPerClient: number;
  /** A connection whose queued answer bytes make no progress for this long is closed. */
  writeTimeoutMs: number;
  /** How often every connection's queue is looked at. */
  sweepMs: number;
}

/** What the write check keeps per connection. */
export interface WriteProgress {
  /** Bytes the connection has handed to the kernel so far, when last seen. */
  flushed: number;
  /** When the queue was last seen empty or moving. */
  movedAt: number;
}

/**
 * True when a connection with `queued` bytes waiting and `flushed` handed to the kernel has moved
 * none of them for `timeoutMs`; otherwise notes any progress in `p`. Progress, not a drained
 * queue, is what counts (as nginx's send_timeout): a client reading a large answer slowly but
 * steadily is not cut, one that stopped reading is.
 */
export function writeStalled(p: WriteProgress, queued: number, flushed: number, now: number, timeoutMs: number): boolean {
  if (queued === 0 || flushed !== p.flushed) {
    p.flushed = flushed;
    p.movedAt = now;
    return false;
  }
  return now - p.movedAt >= timeoutMs;
}

export interface ConnectionEvents {
  refused(reason: RefusalReason): void;
  /** A connection was closed because its client stopped reading. */
  writeTimedOut(): void;
}

interface Tracked extends WriteProgress {
  readonly client: string;
}

/**
 * Every client connection of the router's server, whichever reader serves it (fast path or
 * node:http): past the global or the per-address limit a new connection gets one JSON error
 * answer (503 `connection_limit`, 429 `client_connection_limit`) with `Retry-After` and is
 * closed before its request is read; a connection whose client stops reading what it was sent is
 * closed after `writeTimeoutMs` (the downstream write timeout).
 */
export class ClientConnections {
  private readonly tracked = new Map<Socket, Tracked>();
  private readonly perClient = new Map<string, number>();
  private readonly next: ConnectionListener;
  private readonly sweep: NodeJS.Timeout;
  private readonly answers: Record<RefusalReason, string>;

  constructor(
    private readonly server: Server,
    private readonly limits: ConnectionLimits,
    private readonly events: ConnectionEvents,
  ) {
    this.next = takeConnectionListener(server);
    server.on('connection', this.onConnection);
    this.answers = {
      connections: refusalAnswer({ error: 'connection_limit', message: `the router has ${limits.maxConnections} client connections open, its limit` }),
      client_connections: refusalAnswer({ error: 'client_connection_limit', message: `this address has ${limits.maxConnectionsPerClient} connections open to the router, its limit` }),
    };
    this.sweep = setInterval(() => this.check(Date.now()), limits.sweepMs);
    this.sweep.unref();
  }

  /** Client connections open now. */
  get size(): number {
    return this.tracked.size;
  }

  stop(): void {
    clearInterval(this.sweep);
  }

  private readonly onConnection = (socket: Socket): void => {
    const client = socket.remoteAddress ?? '';
    const fromClient = this.perClient.get(client) ?? 0;
    const reason = refusal(this.tracked.size, fromClient, this.limits);
    if (reason !== undefined) return this.refuse(socket, reason);
    this.perClient.set(client, fromClient + 1);
    const t: Tracked = { client, flushed: 0, movedAt: Date.now() };
    this.tracked.set(socket, t);
    socket.once('close', () => this.forget(socket, t));
    this.next.call(this.server, socket);
  };

  private forget(socket: Socket, t: Tracked): void {
    this.tracked.delete(socket);
    const n = (this.perClient.get(t.client) ?? 1) - 1;
    if (n <= 0) this.perClient.delete(t.client);
    else this.perClient.set(t.client, n);
  }

  private refuse(socket: Socket, reason: RefusalReason): void {
    this.events.refused(reason);
    endWithAnswer(socket, this.answers[reason]);
  }

  private check(now: number): void {
    for (const [socket, t] of this.tracked) {
      if (socket.destroyed) continue;
      const queued = socket.writableLength;
      if (!writeStalled(t, queued, queued === 0 ? 0 : socket.bytesWritten - queued, now, this.limits.writeTimeoutMs)) continue;
      this.events.writeTimedOut();
      socket.destroy();
    }
  }
}

/** A refusal: the JSON error answer with `Retry-After: 1`, the connection closing after it. */
function refusalAnswer(body: ErrorBody): string {
  const answer = clientErrorResponse(body);
  const headEnd = answer.indexOf('\r\n\r\n');
  return `${answer.slice(0, headEnd)}\r\nretry-after: 1${answer.slice(headEnd)}`;
}
