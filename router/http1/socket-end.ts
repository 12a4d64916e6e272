import type { Duplex } from 'node:stream';

/** How long a connection answered with an error stays open for its client to read the answer. */
const LINGER_MS = 1000;

/**
 * Writes a last answer and closes the connection. What the client still sends is read and
 * dropped meanwhile, since closing with bytes unread could reset the connection under the
 * answer; a client that never closes its side is closed after a short while.
 */
export function endWithAnswer(socket: Duplex, answer: string): void {
  socket.on('error', () => undefined);
  socket.end(answer);
  socket.resume();
  const linger = setTimeout(() => socket.destroy(), LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
}
