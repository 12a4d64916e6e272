import { constants } from 'node:http2';
import { inferenceServiceDefinition } from '../../common/grpc/inference-service.js';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT } from '../../common/wine-model.js';
import { framed, RawGrpcConnection } from '../../harness/raw-grpc-client.js';
import type { HostileReport } from './hostile-clients.js';
import { StoppableTimers } from './stoppable-timers.js';

/** How many of each HTTP/2 hostile client run at once (bombs: sent per second). */
export interface GrpcHostileMix {
  /** Connections each holding calls whose message stops halfway (1 MiB announced, 512 KiB sent). */
  stalledMessages: number;
  /** Calls per stalled connection. */
  stalledCallsPerConnection: number;
  /** Clients with a window of 1 that ask for a large answer and never open it. */
  windowOneReaders: number;
  windowOneRows: number;
  /** Calls opened and reset at once, per second, by one client of an address of its own (rapid reset). */
  resetsPerSecond: number;
  /** Messages of two million empty inputs (4 MiB) sent per second. */
  bombsPerSecond: number;
  /** HTTP/2 connections that open no call. */
  idleConnections: number;
}

export type GrpcHostileKind = 'grpc_stalled' | 'grpc_window_one' | 'grpc_resetter' | 'grpc_bomb' | 'grpc_idle';

/** What the HTTP/2 hostile clients got: connections made, calls by kind and status (`reset`: ended without a status), GOAWAY codes. */
export type GrpcHostileReport = HostileReport<GrpcHostileKind>;

const encode = (message: unknown): Buffer => (inferenceServiceDefinition()['ModelInfer'] as { requestSerialize(v: unknown): Buffer }).requestSerialize(message);

/**
 * The HTTP/2 (gRPC) half of bench:hostile's mix (issue 47): each kind a loop that connects again
 * when the router closes its connection, from the loopback addresses the HTTP/1.1 mix uses.
 */
export class GrpcHostileClients {
  private readonly timers = new StoppableTimers();
  private readonly connections = new Set<RawGrpcConnection>();
  private readonly report: GrpcHostileReport = { connections: { grpc_stalled: 0, grpc_window_one: 0, grpc_resetter: 0, grpc_bomb: 0, grpc_idle: 0 }, answers: {} };
  private next = 0;
  private readonly small: Buffer;
  private readonly large: Buffer;
  private readonly bombMessage: Buffer;

  constructor(
    /** The router's gRPC `host:port`. */
    private readonly address: string,
    model: string,
    private readonly mix: GrpcHostileMix,
    private readonly addresses: readonly string[],
    /** The resetting client's address: the router cuts off the address, not just the connection. */
    private readonly resetterAddress: string,
  ) {
    const request = (rows: number): Buffer =>
      framed(
        encode({
          model_name: model,
          inputs: [{ name: WINE_INPUT, datatype: 'FP32', shape: [rows, WINE_FEATURES], contents: { fp32_contents: Array.from({ length: rows }, () => SAMPLE_WINE).flat() } }],
        }),
      );
    this.small = request(1);
    this.large = request(mix.windowOneRows);
    this.bombMessage = framed(Buffer.concat([encode({ model_name: model }), Buffer.alloc(4_000_000).fill(Buffer.from([0x2a, 0x00]))]));
  }

  start(): void {
    for (let i = 0; i < this.mix.stalledMessages; i++) this.loop('grpc_stalled', (c) => this.stalled(c));
    for (let i = 0; i < this.mix.windowOneReaders; i++) this.loop('grpc_window_one', (c) => this.windowOne(c), { initialWindowSize: 1 });
    if (this.mix.resetsPerSecond > 0) this.loop('grpc_resetter', (c) => this.resetter(c), {}, this.resetterAddress);
    for (let i = 0; i < this.mix.idleConnections; i++) this.loop('grpc_idle', () => undefined);
    if (this.mix.bombsPerSecond > 0) this.timers.every(1000 / this.mix.bombsPerSecond, () => this.once('grpc_bomb', (c) => this.count('grpc_bomb', c.call('ModelInfer', this.bombMessage).answer)));
  }

  stop(): GrpcHostileReport {
    this.timers.stop();
    for (const c of this.connections) c.close();
    return this.report;
  }

  /** A connection of `kind` that `use` drives; once it closes, another after a short pause, as an attacker would. */
  private loop(kind: GrpcHostileKind, use: (c: RawGrpcConnection) => void, settings = {}, address?: string): void {
    void this.connect(kind, settings, address).then((c) => {
      if (c !== undefined) use(c);
      const again = (): void => this.timers.after(100, () => this.loop(kind, use, settings, address));
      if (c === undefined) again();
      else void c.closed.then(again);
    });
  }

  private once(kind: GrpcHostileKind, use: (c: RawGrpcConnection) => void): void {
    void this.connect(kind, {}).then((c) => {
      if (c === undefined) return;
      use(c);
      this.timers.after(10_000, () => c.close());
    });
  }

  private async connect(kind: GrpcHostileKind, settings: Record<string, number>, address?: string): Promise<RawGrpcConnection | undefined> {
    if (this.timers.stopped) return undefined;
    const localAddress = address ?? this.addresses[this.next++ % this.addresses.length];
    this.report.connections[kind]++;
    try {
      const c = await RawGrpcConnection.open(this.address, { settings, ...(localAddress === undefined ? {} : { localAddress }) });
      this.connections.add(c);
      void c.closed.then(() => {
        this.connections.delete(c);
        if (c.goawayCode !== undefined && c.goawayCode !== 0) this.tally(`${kind} goaway ${c.goawayCode}`);
      });
      return c;
    } catch {
      this.tally(`${kind} refused`);
      return undefined;
    }
  }

  private stalled(c: RawGrpcConnection): void {
    const half = framed(Buffer.alloc(1024 * 1024)).subarray(0, 512 * 1024);
    for (let i = 0; i < this.mix.stalledCallsPerConnection; i++) this.count('grpc_stalled', c.call('ModelInfer', half, { end: false }).answer);
  }

  private windowOne(c: RawGrpcConnection): void {
    const { answer } = c.call('ModelInfer', this.large, { read: false });
    this.count('grpc_window_one', answer);
    void answer.finally(() => c.close());
  }

  /** Bursts every 10 ms at the mix's rate, until the router closes the connection. */
  private resetter(c: RawGrpcConnection): void {
    const perBurst = Math.max(1, Math.round(this.mix.resetsPerSecond / 100));
    const burst = (): void => {
      if (this.timers.stopped || c.session.closed || c.session.destroyed) return;
      for (let i = 0; i < perBurst; i++) c.call('ModelInfer', this.small).stream.close(constants.NGHTTP2_CANCEL);
      this.timers.after(10, burst);
    };
    burst();
  }

  // A raw call's answer never rejects (it resolves when the stream closes, however it closed): the
  // tally needs no error path, and nothing waits for it.
  private count(kind: GrpcHostileKind, answer: Promise<{ grpcStatus: number | undefined; code: string | undefined }>): void {
    void answer.then((a) => this.tally(`${kind} ${a.grpcStatus === undefined ? 'reset' : `${a.grpcStatus}${a.code === undefined ? '' : ` ${a.code}`}`}`));
  }

  private tally(key: string): void {
    if (this.timers.stopped) return;
    this.report.answers[key] = (this.report.answers[key] ?? 0) + 1;
  }
}
