import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Binds `server` to `host:port`; rejects when it cannot (the port taken, the address unknown). */
export async function listenOn(server: Server, port: number, host: string): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server.address() as AddressInfo;
}
