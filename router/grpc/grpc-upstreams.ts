import { Client, credentials, type ChannelOptions } from '@grpc/grpc-js';
import type { RouteState } from '../discovery/discovery.js';

/**
 * One grpc-js channel per replica that serves gRPC, by replica name, kept in step with the
 * discovery snapshots as the route table keeps its HTTP pools. A channel is one HTTP/2
 * connection that carries every call to its replica at once (multiplexed streams), so it is
 * the pool. A replica that leaves has its channel closed; grpc-js lets the calls on it end.
 */
export class GrpcUpstreams {
  private readonly channels = new Map<string, { address: string; client: Client }>();

  constructor(private readonly options: ChannelOptions) {}

  get(replica: string): Client | undefined {
    return this.channels.get(replica)?.client;
  }

  apply(states: readonly RouteState[]): void {
    const seen = new Map<string, string>();
    for (const s of states) for (const r of s.replicas) if (r.grpc !== undefined) seen.set(r.name, r.grpc);
    for (const [name, c] of this.channels) {
      if (seen.get(name) === c.address) continue;
      c.client.close();
      this.channels.delete(name);
    }
    for (const [name, address] of seen) {
      if (!this.channels.has(name)) this.channels.set(name, { address, client: new Client(address, credentials.createInsecure(), this.options) });
    }
  }

  close(): void {
    for (const c of this.channels.values()) c.client.close();
    this.channels.clear();
  }
}
