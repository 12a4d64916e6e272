import { ModelmuxError } from '../errors.js';
import type { InferParameter, InferTensorContents, ModelInferRequest } from './inference-service.js';
import { tensorFromBinary, toJsonValues, V2_DATATYPES, type V2Datatype } from '../tensor.js';

/**
 * A gRPC ModelInfer request as the replica's V2 body: typed contents become `data`, raw contents
 * become the binary tensor data extension (`binary_data_size` slices after the JSON), so both
 * forms go through the one parser and checks of the HTTP form (inference-body.ts), and a sidecar
 * runtime gets the V2 request an HTTP client would have sent. The router reads a call to an
 * ensemble or a sequence route the same way (router/composite/composite-body.ts). Pure.
 */

/** The V2 body, the binary data after it, and whether the call used raw contents (and so is answered raw). */
export interface GrpcInferBody {
  body: Record<string, unknown>;
  binary: Uint8Array;
  raw: boolean;
}

/** Which typed field holds each datatype's elements; FP16 and BF16 have none (raw only). */
export const CONTENTS_FIELD: Record<string, keyof InferTensorContents | undefined> = {
  BOOL: 'bool_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
};

const invalid = (message: string): ModelmuxError => new ModelmuxError('invalid_request', message);

/** InferParameter's value; an int64 past 2^53 stays its decimal string (JSON has no exact form for it otherwise). */
function parameterValue(p: InferParameter): unknown {
  switch (p.parameter_choice) {
    case 'bool_param':
      return p.bool_param;
    case 'int64_param': {
      const n = Number(p.int64_param);
      return Number.isSafeInteger(n) ? n : String(p.int64_param);
    }
    case 'string_param':
      return p.string_param;
    default:
      return undefined;
  }
}

/** Parameters as V2 JSON; the binary extension's own are left out: this module sets them. */
function parameters(map: Record<string, InferParameter> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  // for…in, not Object.entries: the decoded map is a plain object, mostly empty, read on every call.
  for (const k in map) {
    if (k === 'binary_data_size' || k === 'binary_data' || k === 'binary_data_output') continue;
    const v = parameterValue(map[k] as InferParameter);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

function shapeOf(shape: readonly (string | number)[], input: string): number[] {
  return shape.map((d) => {
    const n = Number(d);
    if (!Number.isSafeInteger(n) || n < 0) throw invalid(`input "${input}" has a dimension of ${String(d)}`);
    return n;
  });
}

/** The typed field set, other than `field` (any, when undefined), with elements in it. */
function otherContents(c: InferTensorContents | null | undefined, field?: keyof InferTensorContents): string | undefined {
  for (const k in c) {
    const v = c[k as keyof InferTensorContents];
    if (k !== field && Array.isArray(v) && v.length > 0) return k;
  }
  return undefined;
}

/** The elements of typed contents as the JSON values the V2 parser takes (bigints for 64-bit integers). */
function typedValues(input: string, datatype: string, contents: InferTensorContents | null | undefined): unknown[] {
  const field = CONTENTS_FIELD[datatype];
  if (contents == null) return [];
  const other = otherContents(contents, field);
  if (other !== undefined) {
    throw invalid(
      field === undefined
        ? `input "${input}" is ${datatype}, which has no typed contents field: send it in raw_input_contents`
        : `input "${input}" is ${datatype}: its elements go in ${field}, not ${other}`,
    );
  }
  if (field === undefined) return [];
  const values = contents[field] ?? [];
  if (field === 'int64_contents' || field === 'uint64_contents') return values.map((v) => BigInt(v as string | number));
  if (field === 'bytes_contents') {
    const decoder = new TextDecoder();
    return (values as Uint8Array[]).map((b) => decoder.decode(b));
  }
  return values;
}

/** Raw contents as JSON `data`, for runtimes that do not read the binary tensor data extension. */
function rawAsData(name: string, datatype: string, shape: number[], bytes: Uint8Array): unknown[] {
  if (!(V2_DATATYPES as readonly string[]).includes(datatype)) throw new ModelmuxError('input_mismatch', `input "${name}" has datatype ${datatype} (unknown)`);
  const tensor = tensorFromBinary(datatype as V2Datatype, shape, bytes);
  if (typeof tensor === 'string') throw new ModelmuxError('input_mismatch', `input "${name}": ${tensor}`);
  return toJsonValues(tensor);
}

/**
 * `binaryInputs` false: raw contents are sent as JSON `data` (sidecar mode: MLServer, for one,
 * refuses the binary extension in requests); the answer is raw all the same.
 */
export function grpcInferBody(req: ModelInferRequest, binaryInputs = true): GrpcInferBody {
  const raw = req.raw_input_contents ?? [];
  const useRaw = raw.length > 0;
  if (useRaw && raw.length !== req.inputs.length) {
    throw invalid(`raw_input_contents holds ${raw.length} entries for ${req.inputs.length} inputs (one per input, in their order)`);
  }
  const inputs = req.inputs.map((input, i) => {
    const shape = shapeOf(input.shape, input.name);
    const params = parameters(input.parameters);
    if (useRaw) {
      if (otherContents(input.contents) !== undefined) throw invalid(`input "${input.name}" has typed contents and the request has raw_input_contents: use one or the other`);
      if (!binaryInputs) return { name: input.name, datatype: input.datatype, shape, parameters: params, data: rawAsData(input.name, input.datatype, shape, raw[i] ?? new Uint8Array(0)) };
      return { name: input.name, datatype: input.datatype, shape, parameters: { ...params, binary_data_size: raw[i]?.length ?? 0 } };
    }
    return { name: input.name, datatype: input.datatype, shape, parameters: params, data: typedValues(input.name, input.datatype, input.contents) };
  });
  const body: Record<string, unknown> = {
    ...(req.id ? { id: req.id } : {}),
    // Every output is asked as binary data: raw answers take it as is, typed ones decode it.
    parameters: { ...parameters(req.parameters), binary_data_output: true },
    inputs,
    ...(req.outputs !== undefined && req.outputs.length > 0 ? { outputs: req.outputs.map((o) => ({ name: o.name, parameters: parameters(o.parameters) })) } : {}),
  };
  return { body, binary: useRaw && binaryInputs ? concat(raw) : new Uint8Array(0), raw: useRaw };
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1 && parts[0] !== undefined) return parts[0];
  return Buffer.concat(parts);
}
