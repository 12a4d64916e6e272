import { CLIENT_PREFACE, ConnectionError, ErrorCode, FRAME_HEADER_BYTES, type Frame } from './frame-types.js';

/**
 * Cuts a connection's bytes into frames: on a server's, the client preface first (RFC 9113 §3.4), then
 * 9-byte headers and payloads, whatever the chunks' boundaries. A frame longer than our
 * SETTINGS_MAX_FRAME_SIZE is a connection error (FRAME_SIZE_ERROR) before its payload is held, so
 * the bytes held are at most one frame. Payloads are views of the chunks received, copied only
 * when a frame spans chunks.
 */
export class FrameReader {
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** Bytes the held frame needs before it can be read on: its header's, then its whole length. */
  private wanted = 0;
  private prefaceLeft: number;
  /** The frame whose bytes are held has had its header checked. */
  private headerChecked = false;

  constructor(
    private readonly maxFrameSize: number,
    /** Sees each frame's header as soon as it is in, before its payload: what the header alone makes an error throws at once, as nghttp2 does. */
    private readonly checkHeader: (type: number, flags: number, streamId: number, length: number) => void,
    /** A client's reader: the server's bytes start with a frame (its SETTINGS), not the preface. */
    expectsPreface = true,
  ) {
    this.prefaceLeft = expectsPreface ? CLIENT_PREFACE.length : 0;
  }

  /** Feeds `chunk`; `onFrame` sees every frame now whole, in order. Throws ConnectionError. */
  push(chunk: Buffer, onFrame: (f: Frame) => void): void {
    let buf = chunk;
    if (this.heldBytes > 0) {
      this.held.push(chunk);
      // Joined only once the frame (or its header) is in: a frame sent a byte per packet is
      // copied once, not once per byte.
      if (this.heldBytes + chunk.length < this.wanted) {
        this.heldBytes += chunk.length;
        return;
      }
      buf = Buffer.concat(this.held, this.heldBytes + chunk.length);
      this.held = [];
      this.heldBytes = 0;
    }
    let at = 0;
    if (this.prefaceLeft > 0) at = this.preface(buf);
    while (this.prefaceLeft === 0 && buf.length - at >= FRAME_HEADER_BYTES) {
      const length = buf.readUIntBE(at, 3);
      if (length > this.maxFrameSize) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `a frame of ${length} bytes, over SETTINGS_MAX_FRAME_SIZE ${this.maxFrameSize}`);
      const type = buf[at + 3] as number;
      const flags = buf[at + 4] as number;
      const streamId = buf.readUInt32BE(at + 5) & 0x7fffffff;
      const end = at + FRAME_HEADER_BYTES + length;
      // The held frame's header was checked when it came.
      if (!this.headerChecked) this.checkHeader(type, flags, streamId, length);
      if (end > buf.length) {
        this.headerChecked = true;
        this.wanted = end - at;
        break;
      }
      this.headerChecked = false;
      onFrame({ type, flags, streamId, payload: buf.subarray(at + FRAME_HEADER_BYTES, end) });
      at = end;
    }
    if (at < buf.length) {
      this.held.push(buf.subarray(at));
      this.heldBytes = buf.length - at;
      if (!this.headerChecked) this.wanted = FRAME_HEADER_BYTES;
    }
  }

  private preface(buf: Buffer): number {
    const from = CLIENT_PREFACE.length - this.prefaceLeft;
    const n = Math.min(this.prefaceLeft, buf.length);
    if (!buf.subarray(0, n).equals(CLIENT_PREFACE.subarray(from, from + n))) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'the connection did not start with the HTTP/2 client preface');
    this.prefaceLeft -= n;
    return n;
  }
}

/** A frame's payload without its padding (PADDED flag: a pad-length byte first, that many bytes last); undefined when the padding does not fit. */
export function unpadded(payload: Buffer, padded: boolean, skip = 0): Buffer | undefined {
  if (!padded) return payload.subarray(skip);
  if (payload.length < 1) return undefined;
  const pad = payload[0] as number;
  if (1 + skip + pad > payload.length) return undefined;
  return payload.subarray(1 + skip, payload.length - pad);
}
