import { createHash } from 'node:crypto';

/** What tests of large bodies compare: a body's bytes as received against those sent. */
export function digest(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A body of `bytes` bytes that no other seed's shares a window of: its own seed in every word, so a byte misplaced or from another body shows in its digest. */
export function bodyOf(seed: number, bytes: number): Buffer {
  const b = Buffer.allocUnsafe(bytes);
  for (let i = 0; i + 4 <= bytes; i += 4) b.writeUInt32LE((i * 2654435761 + seed * 40503) >>> 0, i);
  return b;
}
