import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay on 127.0.0.1 that counts the bytes the upstream sends back: put between a client
 * and the API server, it gives the client's watch traffic as it crosses the wire (TLS included),
 * whatever the client library. Each accepted connection gets its own upstream connection.
 */
export interface CountingRelay {
  port: number;
  /** Bytes from the upstream to clients since the relay started. */
  downBytes(): number;
  /** Client connections accepted since the relay started. */
  connections(): number;
  close(): Promise<void>;
}

export async function startCountingRelay(upstreamHost: string, upstreamPort: number): Promise<CountingRelay> {
  let down = 0;
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    accepted++;
    const upstream = connect(upstreamPort, upstreamHost);
    sockets.add(client).add(upstream);
    upstream.on('data', (b: Buffer) => (down += b.length));
    client.pipe(upstream).pipe(client);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('relay has no port');
  return {
    port: addr.port,
    downBytes: () => down,
    connections: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
