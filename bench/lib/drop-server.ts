import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { releaseRead } from '../../common/read-release.js';

/**
 * bench:threads' floor under any replica in another process: a node:http server that reads each
 * request's body, keeps none of it (each read freed at once, as the replica frees its reads once
 * copied) and answers two bytes. Run as its own process; prints its port.
 */
const server = createServer((req, res) => {
  req.on('data', releaseRead);
  req.on('end', () => res.end('{}'));
});
server.listen(0, '127.0.0.1', () => console.log(`drop server on ${(server.address() as AddressInfo).port}`));
