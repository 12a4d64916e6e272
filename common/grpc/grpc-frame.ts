/**
 * The length-prefixed message of a unary gRPC call (gRPC over HTTP/2: a compressed-flag byte and
 * a 4-byte big-endian length, then the message), read from the request's DATA chunks as they
 * come, so that its size is known and refused from the first 5 bytes, before the rest arrives.
 * Pure: what it holds is what the caller has counted in its byte budget.
 */

export const PREFIX_BYTES = 5;

export type FrameState =
  | { kind: 'partial' }
  | { kind: 'complete'; message: Buffer; framed: Buffer }
  /** Past `maxBytes`, compressed, or more bytes after the one message a unary call may carry. */
  | { kind: 'refused'; reason: 'too_large' | 'compressed' | 'trailing_bytes'; length?: number };

export class UnaryMessageReader {
  private readonly chunks: Buffer[] = [];
  private received = 0;
  /** The message's length once its prefix is in. */
  private length: number | undefined;
  private state: FrameState = { kind: 'partial' };

  constructor(private readonly maxBytes: number) {}

  /** Bytes held so far, prefix included. */
  get held(): number {
    return this.received;
  }

  /** The length the prefix announces, once it is in. */
  get announced(): number | undefined {
    return this.length;
  }

  push(chunk: Buffer): FrameState {
    if (this.state.kind !== 'partial') {
      if (this.state.kind === 'complete' && chunk.length > 0) this.state = { kind: 'refused', reason: 'trailing_bytes' };
      return this.state;
    }
    this.chunks.push(chunk);
    this.received += chunk.length;
    if (this.length === undefined) {
      if (this.received < PREFIX_BYTES) return this.state;
      const head = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
      if (head[0] !== 0) return (this.state = { kind: 'refused', reason: 'compressed' });
      this.length = head.readUInt32BE(1);
      if (this.length > this.maxBytes) return (this.state = { kind: 'refused', reason: 'too_large', length: this.length });
    }
    const total = PREFIX_BYTES + this.length;
    if (this.received < total) return this.state;
    if (this.received > total) return (this.state = { kind: 'refused', reason: 'trailing_bytes' });
    const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.received);
    this.chunks.length = 0;
    return (this.state = { kind: 'complete', message: all.subarray(PREFIX_BYTES), framed: all });
  }
}

/** The 5-byte prefix of an uncompressed message of `length` bytes. */
export function messagePrefix(length: number): Buffer {
  const prefix = Buffer.allocUnsafe(PREFIX_BYTES);
  prefix[0] = 0;
  prefix.writeUInt32BE(length, 1);
  return prefix;
}

/** `message` with its prefix, in one buffer (uncompressed). */
export function framedMessage(message: Buffer): Buffer {
  return Buffer.concat([messagePrefix(message.length), message], PREFIX_BYTES + message.length);
}

/** A message up to this size goes out with its prefix in one write (one DATA frame), copied once. */
const ONE_WRITE_BYTES = 64 * 1024;

/** Writes `message` framed (uncompressed) to `stream` and ends it; a large message is not copied. */
export function endWithMessage(stream: { write(chunk: Buffer): boolean; end(chunk: Buffer): unknown }, message: Buffer): void {
  const prefix = messagePrefix(message.length);
  if (message.length <= ONE_WRITE_BYTES) {
    stream.end(Buffer.concat([prefix, message], PREFIX_BYTES + message.length));
    return;
  }
  stream.write(prefix);
  stream.end(message);
}
