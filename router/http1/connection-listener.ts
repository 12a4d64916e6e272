import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export type ConnectionListener = (this: Server, socket: Socket) => void;

/**
 * Removes the server's one `connection` listener and returns it, so that a layer in front
 * (the fast path, the connection limits) sees every accepted socket first and passes on the
 * ones it does not keep, by the documented route of that event.
 */
export function takeConnectionListener(server: Server): ConnectionListener {
  const listeners = server.listeners('connection');
  if (listeners.length !== 1) throw new Error(`expected one connection listener, found ${listeners.length}`);
  const listener = listeners[0] as ConnectionListener;
  server.removeListener('connection', listener);
  return listener;
}
