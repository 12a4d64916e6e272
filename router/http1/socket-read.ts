/**
 * The one buffer the router's upstream sockets read into, through `net.connect`'s documented
 * `onread` option (upstream-pool.ts): a read allocates no ArrayBuffer and goes through no
 * Readable stream. Reads run one at a time on the event loop and no reader keeps a view of the
 * buffer past its callback: each copies what it keeps. Client connections, which a server
 * accepts and cannot open with `onread`, read through their `data` events (ADR 0026).
 */
export const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** The bytes of the read just completed; valid until the callback returns. */
export function readBytes(bytes: number): Buffer {
  return READ_BUFFER.subarray(0, bytes);
}
