/**
 * Just enough of the protobuf wire format to write ONNX models and to take one apart field by
 * field: the replica needs to move weights out of a graph without a protobuf runtime, and
 * without decoding (or copying) the megabytes of weights themselves.
 */

export const WIRE_VARINT = 0;
export const WIRE_I64 = 1;
export const WIRE_LEN = 2;
export const WIRE_I32 = 5;

export class ProtoWriter {
  private readonly parts: Uint8Array[] = [];

  private varint(value: number | bigint): void {
    let v = BigInt.asUintN(64, BigInt(value));
    const bytes: number[] = [];
    do {
      let b = Number(v & 0x7fn);
      v >>= 7n;
      if (v !== 0n) b |= 0x80;
      bytes.push(b);
    } while (v !== 0n);
    this.parts.push(Uint8Array.from(bytes));
  }

  private tag(field: number, wire: 0 | 2): void {
    this.varint((field << 3) | wire);
  }

  int(field: number, value: number): this {
    this.tag(field, 0);
    this.varint(value);
    return this;
  }

  bytes(field: number, value: Uint8Array): this {
    this.tag(field, 2);
    this.varint(value.length);
    this.parts.push(value);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, build: (w: ProtoWriter) => void): this {
    const inner = new ProtoWriter();
    build(inner);
    return this.bytes(field, inner.finish());
  }

  /** Bytes already encoded as whole fields (tag included), e.g. copied from another message. */
  raw(encoded: Uint8Array): this {
    this.parts.push(encoded);
    return this;
  }

  finish(): Uint8Array {
    const total = this.parts.reduce((n, p) => n + p.length, 0);
    const out = new Uint8Array(total);
    let off = 0;
    for (const p of this.parts) {
      out.set(p, off);
      off += p.length;
    }
    return out;
  }
}

/** Bytes of the varint encoding of a non-negative `value` (up to 2^53). */
export function varintSize(value: number): number {
  let n = 1;
  while (value >= 128) {
    value = Math.floor(value / 128);
    n++;
  }
  return n;
}

/**
 * Writes a non-negative `value` (up to 2^53) as a varint into `out` at `pos` and answers the
 * position after it: for callers that lay out a message in one preallocated buffer, where
 * ProtoWriter builds it from parts.
 */
export function writeVarint(out: Uint8Array, pos: number, value: number): number {
  while (value >= 128) {
    out[pos++] = (value % 128) | 0x80;
    value = Math.floor(value / 128);
  }
  out[pos++] = value;
  return pos;
}

/** One field of a message: where its encoding starts and ends, and its value. */
export interface ProtoField {
  field: number;
  wire: number;
  /** Offset of the tag: `bytes.subarray(start, end)` is the whole field, ready to copy. */
  start: number;
  end: number;
  /** Varint fields: the value (exact up to 2^53). */
  int: number;
  /** Length-delimited fields: where the payload sits in the message's buffer. */
  valueStart: number;
  valueEnd: number;
}

export class ProtoError extends Error {}

/** Iterates the fields of one message; throws ProtoError on a truncated or malformed encoding. */
export function* protoFields(bytes: Uint8Array, from = 0, to = bytes.length): Generator<ProtoField> {
  let pos = from;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= to) throw new ProtoError('truncated varint');
      const b = bytes[pos++] as number;
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return value;
      scale *= 128;
    }
    throw new ProtoError('varint longer than 10 bytes');
  };
  while (pos < to) {
    const start = pos;
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (field === 0) throw new ProtoError('field number 0');
    let int = 0;
    let valueStart = pos;
    if (wire === WIRE_VARINT) int = varint();
    else if (wire === WIRE_I64) pos += 8;
    else if (wire === WIRE_I32) pos += 4;
    else if (wire === WIRE_LEN) {
      const len = varint();
      valueStart = pos;
      pos += len;
    } else throw new ProtoError(`unsupported wire type ${wire}`);
    if (pos > to) throw new ProtoError(`field ${field} runs past its message`);
    yield { field, wire, start, end: pos, int, valueStart, valueEnd: pos };
  }
}
