import { connect, type Socket } from 'node:net';
import { HEADER_RAY_MODEL_ID } from '../../common/names.js';
import { SAMPLE_WINE } from '../../common/wine-model.js';
import { StoppableTimers } from './stoppable-timers.js';

/** How many of each hostile client run at once (bombs: sent per second). */
export interface HostileMix {
  /** Bodies that stop short: half declare a Content-Length and send half of it, half are chunked without a last chunk. */
  stalledBodies: number;
  /** Request heads that stop halfway. */
  stalledHeads: number;
  /** Clients that send a large rows request, never read the answer, and let go after `slowReaderHoldMs`. */
  slowReaders: number;
  slowReaderRows: number;
  slowReaderHoldMs: number;
  /** Rows bodies of 30 nested arrays (61 bytes), sent at this rate. */
  bombsPerSecond: number;
  /** Connections that send nothing. */
  idleConnections: number;
}

export type HostileKind = 'stalled_body' | 'stalled_head' | 'slow_reader' | 'bomb' | 'idle';

/** What the hostile clients got: connections made, and answers by kind and status (`closed`: none). */
export interface HostileReport<K extends string = HostileKind> {
  connections: Record<K, number>;
  answers: Record<string, number>;
}

/** A body of 30 nested arrays: the 61-byte bomb, in the bare rows form. */
export const BOMB = `${'['.repeat(30)}1${']'.repeat(30)}`;

/**
 * The hostile mix of bench:hostile, each kind a loop that reconnects when the router closes its
 * connection, from loopback addresses other than 127.0.0.1 (the good clients'), spread over a
 * few of them as clients behind different addresses would be.
 */
export class HostileClients {
  private readonly timers = new StoppableTimers();
  private readonly sockets = new Set<Socket>();
  private readonly report: HostileReport = { connections: { stalled_body: 0, stalled_head: 0, slow_reader: 0, bomb: 0, idle: 0 }, answers: {} };
  private next = 0;
  private readonly largeBody: string;

  constructor(
    private readonly port: number,
    /** The pool's path below the router, e.g. `/wine/`. */
    private readonly path: string,
    private readonly model: string,
    private readonly mix: HostileMix,
    private readonly addresses: readonly string[],
  ) {
    this.largeBody = JSON.stringify({ instances: Array.from({ length: mix.slowReaderRows }, () => SAMPLE_WINE) });
  }

  start(): void {
    for (let i = 0; i < this.mix.stalledBodies; i++) this.stalledBody(i % 2 === 0);
    for (let i = 0; i < this.mix.stalledHeads; i++) this.stalledHead();
    for (let i = 0; i < this.mix.slowReaders; i++) this.slowReader();
    for (let i = 0; i < this.mix.idleConnections; i++) this.idle();
    if (this.mix.bombsPerSecond > 0) this.timers.every(1000 / this.mix.bombsPerSecond, () => this.bomb());
  }

  stop(): HostileReport {
    this.timers.stop();
    for (const s of this.sockets) s.destroy();
    return this.report;
  }

  private head(extra: string): string {
    return `POST ${this.path} HTTP/1.1\r\nHost: modelmux\r\ncontent-type: application/json\r\n${HEADER_RAY_MODEL_ID}: ${this.model}\r\n${extra}\r\n`;
  }

  /** A connection of `kind`; `again` runs once it has closed, unless the mix was stopped. */
  private open(kind: HostileKind, again: () => void): Socket {
    const address = this.addresses[this.next++ % this.addresses.length] as string;
    const s = connect({ port: this.port, host: '127.0.0.1', localAddress: address });
    this.sockets.add(s);
    this.report.connections[kind]++;
    let status = 'closed';
    s.once('data', (d: Buffer) => (status = /^HTTP\/1\.1 (\d{3})/.exec(d.toString('latin1', 0, 16))?.[1] ?? 'other'));
    s.on('error', () => undefined);
    s.once('close', () => {
      this.sockets.delete(s);
      if (this.timers.stopped) return;
      const key = `${kind} ${status}`;
      this.report.answers[key] = (this.report.answers[key] ?? 0) + 1;
      // A refused or closed client comes back, as an attacker would, after a short pause.
      this.timers.after(100, again);
    });
    return s;
  }

  private stalledBody(chunked: boolean): void {
    const s = this.open('stalled_body', () => this.stalledBody(chunked));
    if (chunked) s.write(`${this.head('transfer-encoding: chunked\r\n')}10000\r\n${'x'.repeat(0x10000)}\r\n`);
    else s.write(this.head(`content-length: ${1024 * 1024}\r\n`) + 'x'.repeat(512 * 1024));
  }

  private stalledHead(): void {
    this.open('stalled_head', () => this.stalledHead()).write(`POST ${this.path} HTTP/1.1\r\nHost: modelmux\r\ncontent-`);
  }

  private slowReader(): void {
    const s = this.open('slow_reader', () => this.slowReader());
    s.pause();
    s.write(this.head(`content-length: ${Buffer.byteLength(this.largeBody)}\r\n`) + this.largeBody);
    this.timers.after(this.mix.slowReaderHoldMs, () => s.destroy());
  }

  private idle(): void {
    this.open('idle', () => this.idle());
  }

  private bomb(): void {
    const s = this.open('bomb', () => undefined);
    s.write(this.head(`content-length: ${BOMB.length}\r\nconnection: close\r\n`) + BOMB);
  }
}
