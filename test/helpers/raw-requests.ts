import type { Socket } from 'node:net';

/** A request head a raw test server read: its text (up to the blank line) and its Content-Length. */
export interface RawHead {
  text: string;
  contentLength: number;
}

/**
 * Splits what a raw TCP test server receives on `socket` into HTTP/1.1 requests framed by their
 * Content-Length: `head` is called once a request's head is in, before its body, `progress` with
 * the body's bytes received so far after every read, `request` once its body is in too. The pieces of a body are joined once, when it is whole.
 */
export function readRequests(socket: Socket, on: { head?(head: RawHead): void; progress?(head: RawHead, bodyBytes: number): void; request(head: RawHead, body: Buffer): void }): void {
  let parts: Buffer[] = [];
  let size = 0;
  let head: RawHead | undefined;
  let bodyAt = 0;
  socket.on('error', () => undefined);
  socket.on('data', (d: Buffer) => {
    parts.push(d);
    size += d.length;
    for (;;) {
      if (head === undefined) {
        const buf = Buffer.concat(parts, size);
        parts = [buf];
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const text = buf.toString('latin1', 0, end);
        head = { text, contentLength: Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? 0) };
        bodyAt = end + 4;
        on.head?.(head);
      }
      on.progress?.(head, Math.min(size - bodyAt, head.contentLength));
      if (size < bodyAt + head.contentLength) return;
      const buf = Buffer.concat(parts, size);
      const done = head;
      const rest = buf.subarray(bodyAt + done.contentLength);
      parts = rest.length > 0 ? [rest] : [];
      size = rest.length;
      head = undefined;
      on.request(done, buf.subarray(bodyAt, bodyAt + done.contentLength));
    }
  });
}
