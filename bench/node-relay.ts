import net from 'node:net';

/**
 * The floor of any proxy written for Node on this machine, for `npm run bench:proxy`'s
 * `node-relay` target: one connection to the upstream per client connection, bytes copied both
 * ways, no HTTP read at all. It does far less than a proxy must (no routing, no limits, no
 * headers), so it is a yardstick for the router's own work, never a way to serve traffic.
 *
 * Usage: node dist/bench/node-relay.js <listen port> <upstream port>  (both on 127.0.0.1)
 */
const [port, upstreamPort] = process.argv.slice(2).map(Number);
if (!Number.isInteger(port) || !Number.isInteger(upstreamPort)) {
  process.stderr.write('usage: node-relay <listen port> <upstream port>\n');
  process.exit(2);
}
const server = net.createServer((client) => {
  const upstream = net.connect(upstreamPort as number, '127.0.0.1');
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.on('data', (b) => upstream.write(b));
  upstream.on('data', (b) => client.write(b));
  client.on('close', () => upstream.destroy());
  upstream.on('close', () => client.destroy());
  client.on('error', () => undefined);
  upstream.on('error', () => undefined);
});
server.listen(port, '127.0.0.1', () => process.stdout.write(`node-relay listening on ${port}\n`));
process.on('SIGTERM', () => process.exit(0));
