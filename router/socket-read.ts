import type { Socket } from 'node:net';

/**
 * The one buffer every router socket reads into: a read allocates no ArrayBuffer and goes
 * through no Readable stream. Per read that saves a 64 KiB malloc, a backing store for the
 * young generation's sweep and a nextTick (RESULTS section 2). Reads run one at a time on the
 * event loop and no reader keeps a view of the buffer past its callback: each copies what it
 * keeps.
 */
export const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** The bytes of the read just completed; valid until the callback returns. */
export function readBytes(bytes: number): Buffer {
  return READ_BUFFER.subarray(0, bytes);
}

type UserBufferHandle = { useUserBuffer?: (buffer: Buffer) => void };

/**
 * Makes a socket that node:net accepted read into READ_BUFFER: `onRead(bytes)` gets each read,
 * false stops reading until `socket.resume()`; the end of the stream and errors still come as
 * events. It is what `net.connect`'s documented `onread` option does for sockets the router
 * opens, which a server cannot ask for its accepted sockets: this sets the same two slots
 * net's constructor sets for that option (found by their symbols' names) and points the handle
 * at the buffer, as net does. Returns false and changes nothing when this Node lacks them (or
 * the socket already reads into a buffer of its own), so the caller listens to `data` instead;
 * test/unit/router/socket-read.test.ts checks that Node 20 has them.
 * Call it in the server's `connection` event, before the socket's first read completes.
 */
export function readIntoSharedBuffer(socket: Socket, onRead: (bytes: number) => boolean): boolean {
  const slots = Object.getOwnPropertySymbols(socket);
  const kBuffer = slots.find((s) => s.description === 'kBuffer');
  const kBufferCb = slots.find((s) => s.description === 'kBufferCb');
  const handle = (socket as unknown as { _handle?: UserBufferHandle | null })._handle;
  if (kBuffer === undefined || kBufferCb === undefined || typeof handle?.useUserBuffer !== 'function') return false;
  const s = socket as unknown as Record<symbol, unknown>;
  if (s[kBuffer] !== null && s[kBuffer] !== undefined) return false;
  s[kBuffer] = READ_BUFFER;
  s[kBufferCb] = onRead;
  handle.useUserBuffer(READ_BUFFER);
  return true;
}
