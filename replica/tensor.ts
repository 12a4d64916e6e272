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

export const V2_DATATYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP32', 'FP64'] as const;
export type V2Datatype = (typeof V2_DATATYPES)[number];

export type TensorData =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

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

export interface ModelSignature {
  inputs: TensorSpec[];
  outputs: TensorSpec[];
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
  FP32: 'float32',
  FP64: 'float64',
};

export function datatypeFromOrt(type: string): V2Datatype | undefined {
  for (const [k, v] of Object.entries(ORT_TYPE)) if (v === type) return k as V2Datatype;
  return undefined;
}

export function elementCount(dims: readonly number[]): number {
  return dims.reduce((n, d) => n * d, 1);
}

const INT_RANGE: Partial<Record<V2Datatype, [number, number]>> = {
  UINT8: [0, 255],
  UINT16: [0, 65535],
  UINT32: [0, 4294967295],
  INT8: [-128, 127],
  INT16: [-32768, 32767],
  INT32: [-2147483648, 2147483647],
  INT64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  UINT64: [0, Number.MAX_SAFE_INTEGER],
};

/**
 * Builds the typed array of `datatype` from JSON values; returns a reason when a value does not
 * fit (a string, a fraction in an integer tensor, out of range), never throws.
 */
export function typedArrayFrom(datatype: V2Datatype, values: readonly unknown[]): TensorData | string {
  const n = values.length;
  const out = allocate(datatype, n);
  const range = INT_RANGE[datatype];
  for (let i = 0; i < n; i++) {
    const v = values[i];
    let num: number;
    if (typeof v === 'number') num = v;
    else if (typeof v === 'boolean' && datatype === 'BOOL') num = v ? 1 : 0;
    else return `element ${i} is ${v === null ? 'null' : typeof v}, not a number`;
    if (datatype === 'BOOL') {
      if (num !== 0 && num !== 1) return `element ${i} is not a boolean`;
    } else if (range) {
      if (!Number.isInteger(num) || num < range[0] || num > range[1]) return `element ${i} (${num}) is not a ${datatype} integer`;
    }
    if (out instanceof BigInt64Array || out instanceof BigUint64Array) out[i] = BigInt(num);
    else out[i] = num;
  }
  return out;
}

export function allocate(datatype: V2Datatype, n: number): TensorData {
  switch (datatype) {
    case 'BOOL':
    case 'UINT8':
      return new Uint8Array(n);
    case 'UINT16':
      return new Uint16Array(n);
    case 'UINT32':
      return new Uint32Array(n);
    case 'UINT64':
      return new BigUint64Array(n);
    case 'INT8':
      return new Int8Array(n);
    case 'INT16':
      return new Int16Array(n);
    case 'INT32':
      return new Int32Array(n);
    case 'INT64':
      return new BigInt64Array(n);
    case 'FP32':
      return new Float32Array(n);
    case 'FP64':
      return new Float64Array(n);
  }
}

/** Bytes per element in the binary tensor extension of the Open Inference Protocol. */
export const ELEMENT_BYTES: Record<V2Datatype, number> = {
  BOOL: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  UINT64: 8,
  INT8: 1,
  INT16: 2,
  INT32: 4,
  INT64: 8,
  FP32: 4,
  FP64: 8,
};

/** A typed array over a copy of little-endian `bytes` (the copy also aligns it). */
export function typedArrayFromBytes(datatype: V2Datatype, bytes: Uint8Array): TensorData {
  const n = bytes.length / ELEMENT_BYTES[datatype];
  const out = allocate(datatype, n);
  new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(bytes);
  if (datatype === 'BOOL') for (let i = 0; i < n; i++) out[i] = out[i] ? 1 : 0;
  return out;
}

export function tensorBytes(t: HostTensor): Uint8Array {
  return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
}

/** JSON-friendly values of a tensor (64-bit integers as numbers, booleans as booleans). */
export function toJsonValues(t: HostTensor): (number | boolean)[] {
  const out: (number | boolean)[] = new Array<number | boolean>(t.data.length);
  for (let i = 0; i < t.data.length; i++) {
    const v = t.data[i] ?? 0;
    out[i] = t.datatype === 'BOOL' ? v !== 0 && v !== 0n : Number(v);
  }
  return out;
}

/** Concatenates tensors of one datatype and equal dims past 0 along dim 0. */
export function concatDim0(parts: readonly HostTensor[]): HostTensor {
  const first = parts[0];
  if (!first) throw new Error('concatDim0 of nothing');
  if (parts.length === 1) return first;
  const rows = parts.reduce((n, p) => n + (p.dims[0] ?? 0), 0);
  const data = allocate(first.datatype, parts.reduce((n, p) => n + p.data.length, 0));
  let off = 0;
  for (const p of parts) {
    (data as { set(a: ArrayLike<number | bigint>, o: number): void }).set(p.data, off);
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
