/**
 * Tensors as the replica moves them between HTTP and the runtime: a datatype name of the Open
 * Inference Protocol, dims, and a flat typed array in row-major order. Independent of
 * onnxruntime so protocol and batching logic can be tested without it.
 */

/**
 * The most dimensions a tensor may have: numpy's limit before 2.0 (NPY_MAXDIMS), more than any
 * ONNX model asks for. Bounds the nesting of a tensor's JSON `data` and of rows, so that every
 * walk over them is bounded in depth.
 */
export const MAX_TENSOR_RANK = 32;

export const V2_DATATYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'BF16', 'FP32', 'FP64', 'BYTES'] as const;
export type V2Datatype = (typeof V2_DATATYPES)[number];

/**
 * FP16 and BF16 are held as their 16-bit patterns (Uint16Array), so binary data passes through
 * exactly; BYTES as strings, which is how onnxruntime holds its string tensors.
 */
export type TensorData = Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array | string[];

export interface HostTensor {
  datatype: V2Datatype;
  dims: number[];
  data: TensorData;
}

/** One input or output of a model; a dim of -1 is dynamic (any size). */
export interface TensorSpec {
  name: string;
  datatype: V2Datatype;
  shape: number[];
}

/** An output the model has but the replica cannot answer, and why. */
export interface UnservedOutput {
  name: string;
  reason: string;
}

export interface ModelSignature {
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  /** Outputs left out of `outputs`: a request may not ask for them; the others are served. */
  unserved?: UnservedOutput[];
}

/** onnxruntime's tensor type names for each V2 datatype. */
export const ORT_TYPE: Record<V2Datatype, string> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  BF16: 'bfloat16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
};

export function datatypeFromOrt(type: string): V2Datatype | undefined {
  for (const [k, v] of Object.entries(ORT_TYPE)) if (v === type) return k as V2Datatype;
  return undefined;
}

export function elementCount(dims: readonly number[]): number {
  return dims.reduce((n, d) => n * d, 1);
}

const INT_RANGE: Partial<Record<V2Datatype, [bigint, bigint]>> = {
  UINT8: [0n, 255n],
  UINT16: [0n, 65535n],
  UINT32: [0n, 4294967295n],
  UINT64: [0n, 18446744073709551615n],
  INT8: [-128n, 127n],
  INT16: [-32768n, 32767n],
  INT32: [-2147483648n, 2147483647n],
  INT64: [-9223372036854775808n, 9223372036854775807n],
};

const FLOAT_TYPES: ReadonlySet<V2Datatype> = new Set(['FP16', 'BF16', 'FP32', 'FP64']);

/**
 * JSON has no Inf or NaN: they are written as these strings, which numpy (and so tritonclient's
 * and KServe's `as_numpy`) reads back as floats. Requests may use them, and Python's spellings.
 */
const NON_FINITE: ReadonlyMap<string, number> = new Map([
  ['inf', Infinity],
  ['+inf', Infinity],
  ['-inf', -Infinity],
  ['nan', NaN],
  ['Infinity', Infinity],
  ['-Infinity', -Infinity],
  ['NaN', NaN],
]);

/** A float as JSON: a number, or "inf" / "-inf" / "nan". */
export function jsonFloat(v: number): number | string {
  if (Number.isFinite(v)) return v;
  return Number.isNaN(v) ? 'nan' : v > 0 ? 'inf' : '-inf';
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The bfloat16 nearest `v` (round to nearest even), as its bit pattern. */
export function toBfloat16Bits(v: number): number {
  f32[0] = v;
  const bits = u32[0] ?? 0;
  if (Number.isNaN(v)) return 0x7fc0;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

export function fromBfloat16Bits(bits: number): number {
  u32[0] = bits << 16;
  return f32[0] ?? 0;
}

/** Node 24 and 26 have Float16Array (the rounding of IEEE half precision); ES2023's types do not. */
const Float16 = (globalThis as unknown as { Float16Array: new (buffer: ArrayBufferLike, offset?: number, length?: number) => ArrayLike<number> & { [i: number]: number } }).Float16Array;

/** Float16Array's view of FP16 bit patterns. */
function halfView(bits: Uint16Array): ArrayLike<number> & { [i: number]: number } {
  return new Float16(bits.buffer, bits.byteOffset, bits.length);
}

/**
 * Builds the typed array of `datatype` from JSON values (bigints where the JSON held an integer
 * past 2^53, see replica/json-body.ts); returns a reason when a value does not fit (a string in a
 * numeric tensor, a fraction in an integer tensor, out of range), never throws.
 */
export function typedArrayFrom(datatype: V2Datatype, values: readonly unknown[]): TensorData | string {
  if (datatype === 'BYTES') return stringsFrom(values);
  const n = values.length;
  const out = allocate(datatype, n);
  const range = INT_RANGE[datatype];
  const float = FLOAT_TYPES.has(datatype);
  const half = datatype === 'FP16' ? halfView(out as Uint16Array) : undefined;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    const num = numberOf(v, datatype, float);
    if (num === undefined) return `element ${i} is ${describe(v)}, not a number`;
    if (datatype === 'BOOL') {
      if (num !== 0 && num !== 1) return `element ${i} is not a boolean`;
    } else if (range) {
      if (typeof num === 'number' && !Number.isInteger(num)) return `element ${i} (${num}) is not a ${datatype} integer`;
      const big = BigInt(num);
      if (big < range[0] || big > range[1]) return `element ${i} (${num}) is out of the range of ${datatype}`;
      if (out instanceof BigInt64Array || out instanceof BigUint64Array) {
        out[i] = big;
        continue;
      }
    }
    const x = Number(num);
    if (half) half[i] = x;
    else if (datatype === 'BF16') (out as Uint16Array)[i] = toBfloat16Bits(x);
    else (out as Float64Array)[i] = x;
  }
  return out;
}

/** BYTES data: strings, and nothing else. */
function stringsFrom(values: readonly unknown[]): string[] | string {
  const n = values.length;
  const out = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (typeof v !== 'string') return `element ${i} is ${v === null ? 'null' : typeof v}, not a string (BYTES data are strings)`;
    out[i] = v;
  }
  return out;
}

/** A JSON value of a numeric tensor as a number (or a bigint past 2^53); undefined when it is none. */
function numberOf(v: unknown, datatype: V2Datatype, float: boolean): number | bigint | undefined {
  if (typeof v === 'number' || typeof v === 'bigint') return v;
  if (typeof v === 'boolean' && datatype === 'BOOL') return v ? 1 : 0;
  if (typeof v === 'string' && float) return NON_FINITE.get(v);
  return undefined;
}

/** What a value that is not a number is, for the reason given back. */
function describe(v: unknown): string {
  if (v === null) return 'null';
  return typeof v === 'string' ? `the string ${JSON.stringify(v.slice(0, 32))}` : typeof v;
}

type NumericData = Exclude<TensorData, string[]>;

/** The typed array of each numeric datatype, made with a length or over existing memory. */
const TYPED_ARRAY: Record<Exclude<V2Datatype, 'BYTES'>, { new (n: number): NumericData; new (buffer: ArrayBufferLike, byteOffset: number, length: number): NumericData }> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  BF16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
};

/** A numeric tensor's storage; BYTES tensors are string arrays, not allocated here. */
export function allocate(datatype: Exclude<V2Datatype, 'BYTES'>, n: number): NumericData {
  return new TYPED_ARRAY[datatype](n);
}

/** Bytes per element in the binary tensor extension of the Open Inference Protocol (BYTES varies). */
export const ELEMENT_BYTES: Record<Exclude<V2Datatype, 'BYTES'>, number> = {
  BOOL: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  UINT64: 8,
  INT8: 1,
  INT16: 2,
  INT32: 4,
  INT64: 8,
  FP16: 2,
  BF16: 2,
  FP32: 4,
  FP64: 8,
};

/**
 * BYTES elements in binary data: each a 4-byte little-endian length and that many bytes (the
 * Open Inference Protocol's layout, as tritonclient writes it); read as UTF-8, as onnxruntime's
 * strings are. A reason when the bytes do not hold `count` such elements exactly.
 */
export function stringsFromBytes(bytes: Uint8Array, count: number): string[] | string {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  const out: string[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + 4 > bytes.length) return `BYTES element ${i} starts past the end of its binary data`;
    const len = view.getUint32(at, true);
    at += 4;
    if (at + len > bytes.length) return `BYTES element ${i} (${len} bytes) runs past the end of its binary data`;
    out.push(decoder.decode(bytes.subarray(at, at + len)));
    at += len;
  }
  if (at !== bytes.length) return `the binary data holds ${bytes.length - at} bytes past its ${count} BYTES elements`;
  return out;
}

/**
 * Whether a typed array of `datatype` can be a view on `bytes` in place: its elements must start
 * at a multiple of their size (typed arrays cannot be misaligned), and BOOL bytes must already
 * be 0 or 1 (anything else is true, and is written as 1 into a copy). Little-endian hosts only,
 * which are all that onnxruntime-node ships for.
 */
export function viewsInPlace(datatype: Exclude<V2Datatype, 'BYTES'>, bytes: Uint8Array): boolean {
  if (bytes.byteOffset % ELEMENT_BYTES[datatype] !== 0) return false;
  if (datatype !== 'BOOL') return true;
  for (let i = 0; i < bytes.length; i++) if ((bytes[i] ?? 0) > 1) return false;
  return true;
}

/**
 * A typed array of little-endian `bytes`: a view on them where `viewsInPlace` allows (the caller
 * then must not reuse `bytes` while the tensor lives), else a copy, which also aligns them.
 */
export function typedArrayFromBytes(datatype: Exclude<V2Datatype, 'BYTES'>, bytes: Uint8Array): TensorData {
  const n = bytes.length / ELEMENT_BYTES[datatype];
  if (viewsInPlace(datatype, bytes)) return new TYPED_ARRAY[datatype](bytes.buffer, bytes.byteOffset, n);
  const out = allocate(datatype, n);
  new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(bytes);
  if (datatype === 'BOOL') for (let i = 0; i < n; i++) out[i] = out[i] ? 1 : 0;
  return out;
}

/**
 * The tensor of `datatype` and `dims` held in `bytes` (the binary tensor data extension, gRPC's raw
 * contents): little-endian elements, BYTES as length-prefixed strings. A reason when the bytes do
 * not hold exactly that many elements.
 */
export function tensorFromBinary(datatype: V2Datatype, dims: number[], bytes: Uint8Array): HostTensor | string {
  const count = elementCount(dims);
  if (datatype === 'BYTES') {
    const strings = stringsFromBytes(bytes, count);
    return typeof strings === 'string' ? strings : { datatype, dims, data: strings };
  }
  const want = count * ELEMENT_BYTES[datatype];
  if (bytes.length !== want) return `${bytes.length} bytes of binary data for shape [${dims.join(',')}] (${want} expected)`;
  return { datatype, dims, data: typedArrayFromBytes(datatype, bytes) };
}

export function tensorBytes(t: HostTensor): Uint8Array {
  if (Array.isArray(t.data)) {
    const encoder = new TextEncoder();
    const parts = t.data.map((s) => encoder.encode(s));
    const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
    const view = new DataView(out.buffer);
    let at = 0;
    for (const p of parts) {
      view.setUint32(at, p.length, true);
      out.set(p, at + 4);
      at += 4 + p.length;
    }
    return out;
  }
  return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
}

/** JSON.rawJSON (Node 21+): an integer past 2^53 written exactly; ES2023's types lack it. A static function: it needs no `this`. */
const rawJSON = (JSON as unknown as { rawJSON: (text: string) => unknown }).rawJSON;

/**
 * JSON values of a tensor: numbers, booleans for BOOL, strings for BYTES and for non-finite
 * floats (see `jsonFloat`), and 64-bit integers exactly (raw JSON numbers past 2^53).
 */
export function toJsonValues(t: HostTensor): unknown[] {
  const d = t.data;
  if (Array.isArray(d)) return [...d];
  const n = d.length;
  const out = new Array<unknown>(n);
  if (d instanceof BigInt64Array || d instanceof BigUint64Array) {
    for (let i = 0; i < n; i++) {
      const v = d[i] ?? 0n;
      out[i] = v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : rawJSON(v.toString());
    }
    return out;
  }
  if (t.datatype === 'BOOL') {
    for (let i = 0; i < n; i++) out[i] = d[i] !== 0;
    return out;
  }
  const values = t.datatype === 'FP16' ? halfView(d as Uint16Array) : d;
  for (let i = 0; i < n; i++) {
    const v = t.datatype === 'BF16' ? fromBfloat16Bits(values[i] ?? 0) : (values[i] ?? 0);
    out[i] = FLOAT_TYPES.has(t.datatype) ? jsonFloat(v) : v;
  }
  return out;
}

/** Concatenates tensors of one datatype and equal dims past 0 along dim 0. */
export function concatDim0(parts: readonly HostTensor[]): HostTensor {
  const first = parts[0];
  if (!first) throw new Error('concatDim0 of nothing');
  if (parts.length === 1) return first;
  const rows = parts.reduce((n, p) => n + (p.dims[0] ?? 0), 0);
  if (Array.isArray(first.data)) return { datatype: first.datatype, dims: [rows, ...first.dims.slice(1)], data: parts.flatMap((p) => p.data as string[]) };
  const data = allocate(
    first.datatype as Exclude<V2Datatype, 'BYTES'>,
    parts.reduce((n, p) => n + p.data.length, 0),
  );
  let off = 0;
  for (const p of parts) {
    (data as { set(a: ArrayLike<number | bigint>, o: number): void }).set(p.data as ArrayLike<number | bigint>, off);
    off += p.data.length;
  }
  return { datatype: first.datatype, dims: [rows, ...first.dims.slice(1)], data };
}

/** Cuts a tensor along dim 0 into consecutive pieces of `rows[i]` rows. */
export function splitDim0(t: HostTensor, rows: readonly number[]): HostTensor[] {
  const total = t.dims[0] ?? 0;
  const sum = rows.reduce((a, b) => a + b, 0);
  if (sum !== total) throw new Error(`cannot split ${total} rows into ${sum}`);
  const per = total === 0 ? 0 : t.data.length / total;
  const out: HostTensor[] = [];
  let row = 0;
  for (const r of rows) {
    out.push({ datatype: t.datatype, dims: [r, ...t.dims.slice(1)], data: t.data.slice(row * per, (row + r) * per) });
    row += r;
  }
  return out;
}
