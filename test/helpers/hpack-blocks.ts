import { HUFFMAN_CODES, HUFFMAN_LENGTHS } from '../../common/http2/hpack-huffman.js';

/**
 * Test-side pieces of header blocks: the router's encoder never Huffman-codes, so the tests carry
 * the tiny encoder that makes Huffman strings for the decoder to read.
 */

/** The Huffman code of `bytes`, padded with ones to a whole byte (RFC 7541 §5.2). */
export function huffmanEncode(bytes: Uint8Array): Buffer {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const byte of bytes) {
    const length = HUFFMAN_LENGTHS[byte] ?? 0;
    const code = HUFFMAN_CODES[byte] ?? 0;
    for (let bit = length - 1; bit >= 0; bit--) {
      acc = (acc << 1) | ((code >>> bit) & 1);
      if (++bits === 8) {
        out.push(acc);
        acc = 0;
        bits = 0;
      }
    }
  }
  if (bits > 0) out.push((acc << (8 - bits)) | (0xff >>> bits));
  return Buffer.from(out);
}

/** An HPACK integer: `flags` in the bits above the prefix (RFC 7541 §5.1). */
export function hpackInteger(flags: number, value: number, prefixBits: number): Buffer {
  const mask = (1 << prefixBits) - 1;
  if (value < mask) return Buffer.from([flags | value]);
  const out = [flags | mask];
  let rest = value - mask;
  for (; rest >= 128; rest = Math.floor(rest / 128)) out.push((rest % 128) | 0x80);
  out.push(rest);
  return Buffer.from(out);
}

/** A string literal, Huffman-coded or raw. */
export function hpackString(s: string, huffman = false): Buffer {
  const bytes = huffman ? huffmanEncode(Buffer.from(s, 'latin1')) : Buffer.from(s, 'latin1');
  return Buffer.concat([hpackInteger(huffman ? 0x80 : 0, bytes.length, 7), bytes]);
}

/** A literal field with incremental indexing and a new name (RFC 7541 §6.2.1). */
export function literalIndexed(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0x40]), hpackString(name), hpackString(value)]);
}

/** [[name, value], …] from a decoder's flat list. */
export function pairs(flat: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i] ?? '', flat[i + 1] ?? '']);
  return out;
}
