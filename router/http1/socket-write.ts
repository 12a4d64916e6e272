import type { Socket } from 'node:net';

/**
 * Bodies up to this size go out in one buffer with their head. Copying a small body costs less
 * than the writev of two pieces through Node's stream machinery; a large one is not copied.
 */
const MERGE_BYTES = 16 * 1024;

/**
 * Writes an HTTP/1.1 head (latin1, one byte per character) and the body that follows it: one
 * buffer and one write call when the body is small, a corked head and body otherwise.
 * Returns what `socket.write` returns (false: wait for 'drain'). `written`, when given, is called
 * once the socket no longer reads `body`: its bytes sent, or the write failed or was destroyed.
 */
export function writeHeadAndBody(socket: Socket, head: string, body: Buffer | null, written?: () => void): boolean {
  if (body === null || body.length === 0) {
    written?.();
    return socket.write(head, 'latin1');
  }
  if (body.length > MERGE_BYTES) {
    socket.cork();
    socket.write(head, 'latin1');
    const ok = socket.write(body, written);
    socket.uncork();
    return ok;
  }
  const out = Buffer.allocUnsafe(head.length + body.length);
  out.write(head, 0, 'latin1');
  body.copy(out, head.length);
  written?.();
  return socket.write(out);
}
