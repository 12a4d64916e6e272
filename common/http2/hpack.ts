import { huffmanDecode, huffmanDecodedBound } from './hpack-huffman.js';
import { STATIC_TABLE } from './hpack-static-table.js';

/**
 * HPACK (RFC 7541) for the router's own HTTP/2 framing. The decoder keeps the peer's dynamic
 * table; the encoder never adds to one, so it keeps no state and answers need no ordering.
 *
 * Names are returned as received, upper-case included: a field name with an upper-case letter
 * makes the request malformed (RFC 7540 §8.1.2), which is the caller's check, not a reason to end
 * the connection. Strings are latin1, one character per byte, as node:http2 gives header values.
 */

/** A header block that cannot be decoded: the connection must end with GOAWAY COMPRESSION_ERROR (RFC 7540 §4.3). */
export class HpackError extends Error {
  override readonly name = 'HpackError';
}

export interface HpackDecoderLimits {
  /** Our SETTINGS_HEADER_TABLE_SIZE: the most a dynamic table size update may ask (4096). */
  maxTableBytes: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE: sum of name + value + 32 per field (RFC 7540 §6.5.2). */
  maxHeaderListBytes: number;
  /** Most fields in one block. */
  maxFields: number;
}

export interface DecodedBlock {
  /** Flat [name, value, name, value, …] in the order received; empty when tooLarge. */
  fields: string[];
  /** The list passed maxHeaderListBytes or maxFields: the stream is refused, but the table stayed in sync, the connection lives. */
  tooLarge: boolean;
}

/** What each table entry costs beyond its name and value (RFC 7541 §4.1). */
const ENTRY_OVERHEAD = 32;
/** The largest integer accepted: nothing in a block (an index, a length, a table size) needs more. */
const MAX_INTEGER = 2 ** 31 - 1;
/** 2^31 needs 5 continuation bytes after a full prefix; more is padding with zeros or an attack. */
const MAX_CONTINUATION_BYTES = 5;
const STATIC_COUNT = STATIC_TABLE.length;

export class HpackDecoder {
  private readonly limits: HpackDecoderLimits;
  /** The dynamic table as a ring, newest at head - 1; entries are at least 32 bytes, so this many fit. */
  private readonly capacity: number;
  private readonly names: string[];
  private readonly values: string[];
  private head = 0;
  private count = 0;
  private tableBytes = 0;
  private tableLimit: number;
  /** Huffman output, grown to the longest string seen so far and reused. */
  private scratch = Buffer.allocUnsafe(256);
  /** The block being decoded and the read position in it. */
  private block: Buffer = Buffer.alloc(0);
  private pos = 0;
  private fields: string[] = [];
  private listBytes = 0;
  private fieldCount = 0;
  private tooLarge = false;

  constructor(limits: HpackDecoderLimits) {
    this.limits = { ...limits };
    this.tableLimit = limits.maxTableBytes;
    this.capacity = Math.max(1, Math.floor(limits.maxTableBytes / ENTRY_OVERHEAD));
    this.names = new Array<string>(this.capacity).fill('');
    this.values = new Array<string>(this.capacity).fill('');
  }

  /** Decodes one whole header block (a HEADERS frame's fragment and its CONTINUATIONs, joined). Throws HpackError on malformed input. */
  decode(block: Buffer): DecodedBlock {
    this.block = block;
    this.pos = 0;
    this.fields = [];
    this.listBytes = 0;
    this.fieldCount = 0;
    this.tooLarge = false;
    try {
      this.readSizeUpdates();
      while (this.pos < block.length) this.readField();
      return { fields: this.tooLarge ? [] : this.fields, tooLarge: this.tooLarge };
    } finally {
      // The block may be a view of a pooled buffer: holding it past the call would pin it.
      this.block = EMPTY;
      this.fields = [];
    }
  }

  /** The dynamic table's size in RFC 7541 §4.1 bytes, for tests and metrics. */
  get dynamicTableBytes(): number {
    return this.tableBytes;
  }

  /** The dynamic table, newest first, as [name, value] pairs: for tests. */
  dynamicTable(): [string, string][] {
    const entries: [string, string][] = [];
    for (let i = 0; i < this.count; i++) entries.push([this.nameAt(STATIC_COUNT + 1 + i), this.valueAt(STATIC_COUNT + 1 + i)]);
    return entries;
  }

  /** Size updates may only open a block (RFC 7541 §4.2); one anywhere else is a decoding error. */
  private readSizeUpdates(): void {
    while (this.pos < this.block.length && ((this.block[this.pos] ?? 0) & 0xe0) === 0x20) {
      const size = this.readInteger(5);
      if (size > this.limits.maxTableBytes) {
        throw new HpackError(`a dynamic table size update asks ${size} bytes, over the ${this.limits.maxTableBytes} allowed`);
      }
      this.tableLimit = size;
      this.evictTo(size);
    }
  }

  private readField(): void {
    const first = this.block[this.pos] ?? 0;
    if ((first & 0x80) !== 0) {
      const index = this.readInteger(7);
      if (index === 0) throw new HpackError('an indexed header field names index 0');
      this.emit(this.nameAt(index), this.valueAt(index));
    } else if ((first & 0x40) !== 0) {
      const name = this.readName(6);
      const value = this.readString();
      this.insert(name, value);
      this.emit(name, value);
    } else if ((first & 0x20) !== 0) {
      throw new HpackError('a dynamic table size update after the first header field');
    } else {
      // Without indexing (0000) and never indexed (0001) decode alike: the flag only binds re-encoders.
      const name = this.readName(4);
      this.emit(name, this.readString());
    }
  }

  private readName(prefixBits: number): string {
    const index = this.readInteger(prefixBits);
    return index === 0 ? this.readString() : this.nameAt(index);
  }

  /** Past a limit the fields are dropped, not the decoding: the table must still follow the peer's. */
  private emit(name: string, value: string): void {
    this.listBytes += name.length + value.length + ENTRY_OVERHEAD;
    this.fieldCount++;
    if (this.tooLarge) return;
    if (this.listBytes > this.limits.maxHeaderListBytes || this.fieldCount > this.limits.maxFields) {
      this.tooLarge = true;
      this.fields = [];
      return;
    }
    this.fields.push(name, value);
  }

  private readInteger(prefixBits: number): number {
    const block = this.block;
    const mask = (1 << prefixBits) - 1;
    const value = (block[this.pos++] ?? 0) & mask;
    if (value < mask) return value;
    return this.readContinuation(value);
  }

  private readContinuation(prefix: number): number {
    const block = this.block;
    let value = prefix;
    let scale = 1;
    for (let i = 0; i < MAX_CONTINUATION_BYTES; i++) {
      if (this.pos >= block.length) throw new HpackError('the header block ends inside an integer');
      const byte = block[this.pos++] ?? 0;
      value += (byte & 0x7f) * scale;
      if (value > MAX_INTEGER) throw new HpackError('an integer in the header block is over 2^31 - 1');
      if ((byte & 0x80) === 0) return value;
      scale *= 128;
    }
    throw new HpackError(`an integer in the header block runs over ${MAX_CONTINUATION_BYTES} continuation bytes`);
  }

  private readString(): string {
    const block = this.block;
    if (this.pos >= block.length) throw new HpackError('the header block ends before a string');
    const huffman = ((block[this.pos] ?? 0) & 0x80) !== 0;
    const length = this.readInteger(7);
    const start = this.pos;
    const end = start + length;
    if (end > block.length) throw new HpackError(`a string of ${length} bytes runs past the header block's end`);
    this.pos = end;
    if (!huffman) return block.toString('latin1', start, end);
    const bound = huffmanDecodedBound(length);
    if (this.scratch.length < bound) this.scratch = Buffer.allocUnsafe(Math.max(bound, this.scratch.length * 2));
    const written = huffmanDecode(block, start, end, this.scratch);
    if (written < 0) throw new HpackError('a Huffman-coded string holds EOS or bad padding');
    return this.scratch.toString('latin1', 0, written);
  }

  private slotOf(index: number): number {
    const offset = index - STATIC_COUNT - 1;
    if (offset >= this.count) {
      throw new HpackError(`index ${index} is past the static table and the ${this.count} dynamic entries`);
    }
    return (this.head - 1 - offset + this.capacity) % this.capacity;
  }

  private nameAt(index: number): string {
    if (index <= STATIC_COUNT) return (STATIC_TABLE[index - 1] ?? EMPTY_ENTRY)[0];
    return this.names[this.slotOf(index)] ?? '';
  }

  private valueAt(index: number): string {
    if (index <= STATIC_COUNT) return (STATIC_TABLE[index - 1] ?? EMPTY_ENTRY)[1];
    return this.values[this.slotOf(index)] ?? '';
  }

  /** An entry larger than the table empties it and is not added (RFC 7541 §4.4). */
  private insert(name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    if (size > this.tableLimit) {
      this.evictTo(0);
      return;
    }
    this.evictTo(this.tableLimit - size);
    this.names[this.head] = name;
    this.values[this.head] = value;
    this.head = (this.head + 1) % this.capacity;
    this.count++;
    this.tableBytes += size;
  }

  private evictTo(bytes: number): void {
    while (this.tableBytes > bytes) {
      const oldest = (this.head - this.count + this.capacity) % this.capacity;
      this.tableBytes -= (this.names[oldest] ?? '').length + (this.values[oldest] ?? '').length + ENTRY_OVERHEAD;
      this.names[oldest] = '';
      this.values[oldest] = '';
      this.count--;
    }
  }
}

const EMPTY = Buffer.alloc(0);
const EMPTY_ENTRY: readonly [string, string] = ['', ''];

/** Static indices by name, then by value: the first index of a name is the one to reuse. */
const STATIC_BY_NAME = new Map<string, { nameIndex: number; byValue: Map<string, number> }>();
STATIC_TABLE.forEach(([name, value], i) => {
  let entry = STATIC_BY_NAME.get(name);
  if (entry === undefined) STATIC_BY_NAME.set(name, (entry = { nameIndex: i + 1, byValue: new Map() }));
  entry.byValue.set(value, i + 1);
});

/** Encodes response fields (flat [name, value, …], names lower-case) as one header block: never indexed into a dynamic table, so the encoder keeps no state; static-table indices where a name (or name and value, e.g. `:status 200`) match. */
export function encodeHeaderBlock(fields: readonly string[]): Buffer {
  let size = 0;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i] ?? '';
    const value = fields[i + 1] ?? '';
    const entry = STATIC_BY_NAME.get(name);
    const exact = entry?.byValue.get(value);
    if (exact !== undefined) size += integerBytes(exact, 7);
    else if (entry !== undefined) size += integerBytes(entry.nameIndex, 4) + stringBytes(value);
    else size += 1 + stringBytes(name) + stringBytes(value);
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i] ?? '';
    const value = fields[i + 1] ?? '';
    const entry = STATIC_BY_NAME.get(name);
    const exact = entry?.byValue.get(value);
    if (exact !== undefined) {
      at = writeInteger(out, at, 0x80, exact, 7);
    } else {
      // Literal without indexing (RFC 7541 §6.2.2), the name by static index where there is one.
      at = writeInteger(out, at, 0x00, entry?.nameIndex ?? 0, 4);
      if (entry === undefined) at = writeString(out, at, name);
      at = writeString(out, at, value);
    }
  }
  return out;
}

function integerBytes(value: number, prefixBits: number): number {
  const mask = (1 << prefixBits) - 1;
  if (value < mask) return 1;
  let bytes = 2;
  for (let rest = value - mask; rest >= 128; rest = Math.floor(rest / 128)) bytes++;
  return bytes;
}

function stringBytes(s: string): number {
  return integerBytes(s.length, 7) + s.length;
}

function writeInteger(out: Buffer, at: number, flags: number, value: number, prefixBits: number): number {
  const mask = (1 << prefixBits) - 1;
  if (value < mask) {
    out[at] = flags | value;
    return at + 1;
  }
  out[at++] = flags | mask;
  let rest = value - mask;
  for (; rest >= 128; rest = Math.floor(rest / 128)) out[at++] = (rest % 128) | 0x80;
  out[at] = rest;
  return at + 1;
}

function writeString(out: Buffer, at: number, s: string): number {
  const start = writeInteger(out, at, 0x00, s.length, 7);
  return start + out.write(s, start, s.length, 'latin1');
}
