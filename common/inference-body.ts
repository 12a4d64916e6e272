import { z } from 'zod';
import { ModelmuxError } from './errors.js';
import { splitModelId } from './model-version.js';
import { elementCount, MAX_TENSOR_RANK, tensorBytes, tensorFromBinary, typedArrayFrom, toJsonValues, V2_DATATYPES, type HostTensor, type ModelSignature, type TensorSpec } from './tensor.js';

/**
 * Request and response bodies, pure. Two body forms are accepted on every endpoint:
 * - Open Inference Protocol (KServe V2): `{"inputs":[{"name","shape","datatype","data"}], "outputs"?:[{"name"}]}`,
 *   answered with `{"model_name","model_version","id"?,"outputs":[{"name","datatype","shape","data"}]}`,
 *   including the binary tensor data extension (`binary_data_size`, `binary_data_output`);
 * - rows, for single-input models: `{"instances":[row, …]}`, a bare `[row, …]`, or one bare row
 *   `[x1, …]`, where a row holds one sample of the input (its shape past dim 0), answered with
 *   `{"predictions":[row, …]}` (one output) or `{"predictions":[{"<output>": row}, …]}`.
 *
 * Tensor values are walked once each, at most MAX_TENSOR_RANK arrays deep; the schema checks
 * only the envelope, so no validation recurses as deep as a body nests.
 */

const v2InputSchema = z.object({
  name: z.string().min(1).max(256),
  shape: z.array(z.number().int().nonnegative()).max(MAX_TENSOR_RANK),
  datatype: z.string().min(1).max(16),
  /** `binary_data_size`: the tensor's bytes follow the JSON (binary tensor data extension). */
  parameters: z.looseObject({ binary_data_size: z.number().int().nonnegative().optional() }).optional(),
  /**
   * Numbers, booleans or strings, flat or nested in arrays (checked by `dataValues`). Checked to be
   * an array only: `z.array` would walk and copy every value, a fifth of the decode of a large tensor.
   */
  data: z.custom<unknown[]>((v) => Array.isArray(v), 'Invalid input: expected an array').optional(),
});

const outputParameters = z.looseObject({ binary_data: z.boolean().optional() }).optional();

export const v2RequestSchema = z.object({
  id: z.string().max(256).optional(),
  parameters: z.looseObject({ binary_data_output: z.boolean().optional() }).optional(),
  inputs: z.array(v2InputSchema).min(1).max(64),
  outputs: z
    .array(z.object({ name: z.string().min(1).max(256), parameters: outputParameters }))
    .max(64)
    .optional(),
});

export type BodyForm = 'v2' | 'rows';

/** A request checked against its model: one tensor per model input, in the model's order. */
export interface InferRequest {
  form: BodyForm;
  id?: string;
  inputs: HostTensor[];
  /** Output names asked for (V2 `outputs`); all when undefined. */
  outputs?: string[];
  /** Outputs to answer as binary data after the JSON (binary tensor data extension). */
  binaryOutputs?: Set<string>;
  /** Size of dim 0 shared by every input, or undefined when the inputs disagree or are scalars. */
  rows: number | undefined;
}

function tooDeep(what: string): ModelmuxError {
  return new ModelmuxError('invalid_request', `${what} nests arrays more than ${MAX_TENSOR_RANK} deep (the limit: a tensor has at most ${MAX_TENSOR_RANK} dimensions)`);
}

/** Throws unless `v` is a value a tensor can hold (what it is checked against the datatype later). */
function checkValue(v: unknown, input: string): void {
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'string' || typeof v === 'bigint') return;
  throw new ModelmuxError('invalid_request', `not an inference request: the data of input "${input}" holds ${v === null ? 'null' : `a ${typeof v}`}, not a number, boolean or string`);
}

/** A V2 input's nested values in order; `depth` counts the arrays around `data`. */
function nestedValues(data: readonly unknown[], input: string, out: unknown[] = [], depth = 1): unknown[] {
  if (depth > MAX_TENSOR_RANK) throw tooDeep(`the data of input "${input}"`);
  for (const v of data) {
    if (Array.isArray(v)) nestedValues(v, input, out, depth + 1);
    else {
      checkValue(v, input);
      out.push(v);
    }
  }
  return out;
}

/** A V2 input's values in order, whatever their nesting: flat `data` is its own list of values, not copied. */
function dataValues(data: readonly unknown[], input: string): readonly unknown[] {
  for (const v of data) {
    if (Array.isArray(v)) return nestedValues(data, input);
    checkValue(v, input);
  }
  return data;
}

function mismatch(message: string): ModelmuxError {
  return new ModelmuxError('input_mismatch', message);
}

function checkShape(spec: TensorSpec, shape: readonly number[]): void {
  if (shape.length !== spec.shape.length) {
    throw mismatch(`input "${spec.name}" has shape [${shape.join(',')}], the model expects rank ${spec.shape.length} ([${spec.shape.map((d) => (d < 0 ? '-1' : d)).join(',')}])`);
  }
  spec.shape.forEach((d, i) => {
    if (d >= 0 && shape[i] !== d) throw mismatch(`input "${spec.name}" has ${shape[i]} in dim ${i}, the model expects ${d}`);
  });
}

function tensorFromBytes(spec: TensorSpec, shape: number[], bytes: Uint8Array): HostTensor {
  checkShape(spec, shape);
  const tensor = tensorFromBinary(spec.datatype, shape, bytes);
  if (typeof tensor === 'string') throw mismatch(`input "${spec.name}": ${tensor}`);
  return tensor;
}

function tensorFor(spec: TensorSpec, shape: number[], values: readonly unknown[]): HostTensor {
  checkShape(spec, shape);
  if (values.length !== elementCount(shape)) {
    throw mismatch(`input "${spec.name}" has ${values.length} values for shape [${shape.join(',')}] (${elementCount(shape)} expected)`);
  }
  const data = typedArrayFrom(spec.datatype, values);
  if (typeof data === 'string') throw mismatch(`input "${spec.name}": ${data}`);
  return { datatype: spec.datatype, dims: shape, data };
}

function sharedRows(inputs: readonly HostTensor[]): number | undefined {
  const first = inputs[0]?.dims[0];
  if (first === undefined) return undefined;
  return inputs.every((t) => t.dims.length > 0 && t.dims[0] === first) ? first : undefined;
}

type V2Request = z.infer<typeof v2RequestSchema>;
type V2Input = z.infer<typeof v2InputSchema>;

function v2Request(body: unknown): V2Request {
  const r = v2RequestSchema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new ModelmuxError('invalid_request', `not an inference request: ${issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : 'invalid'}`);
}

/** The request's inputs by name: each once, each an input of the model. */
function inputsByName(given: readonly V2Input[], sig: ModelSignature): Map<string, V2Input> {
  const byName = new Map<string, V2Input>();
  for (const input of given) {
    if (byName.has(input.name)) throw mismatch(`input "${input.name}" is given twice`);
    if (!sig.inputs.some((s) => s.name === input.name)) {
      throw mismatch(`input "${input.name}" is not an input of the model (inputs: ${sig.inputs.map((s) => s.name).join(', ')})`);
    }
    byName.set(input.name, input);
  }
  return byName;
}

/** Binary inputs take consecutive slices of the data after the JSON, in request order; every byte is declared. */
export function binarySlices(given: readonly V2Input[], binary: Uint8Array): Map<string, Uint8Array> {
  const slices = new Map<string, Uint8Array>();
  let offset = 0;
  for (const input of given) {
    const size = input.parameters?.binary_data_size;
    if (size === undefined) continue;
    if (offset + size > binary.length) throw new ModelmuxError('invalid_request', `input "${input.name}" declares ${size} bytes of binary data beyond the end of the body`);
    slices.set(input.name, binary.subarray(offset, offset + size));
    offset += size;
  }
  if (offset !== binary.length) throw new ModelmuxError('invalid_request', `the body holds ${binary.length - offset} bytes of binary data that no input declares`);
  return slices;
}

/** The tensor of the model's input `spec`, from the request's input of that name and its binary slice, if any. */
function v2Tensor(spec: TensorSpec, given: V2Input | undefined, bytes: Uint8Array | undefined): HostTensor {
  if (!given) throw mismatch(`input "${spec.name}" is missing`);
  if (given.datatype !== spec.datatype) {
    const known = (V2_DATATYPES as readonly string[]).includes(given.datatype);
    throw mismatch(`input "${spec.name}" has datatype ${given.datatype}${known ? '' : ' (unknown)'}, the model expects ${spec.datatype}`);
  }
  if (bytes) return tensorFromBytes(spec, given.shape, bytes);
  if (given.data === undefined) throw new ModelmuxError('invalid_request', `input "${spec.name}" has neither data nor binary_data_size`);
  return tensorFor(spec, given.shape, dataValues(given.data, spec.name));
}

/** The output names asked for, each a served output of the model. */
function askedOutputs(asked: NonNullable<V2Request['outputs']>, sig: ModelSignature): string[] {
  const outputs = asked.map((o) => o.name);
  for (const name of outputs) {
    const unserved = sig.unserved?.find((u) => u.name === name);
    if (unserved) throw mismatch(`output "${name}" is not served: ${unserved.reason}; ask for the others by name (outputs: ${sig.outputs.map((s) => s.name).join(', ')})`);
    if (!sig.outputs.some((s) => s.name === name)) throw mismatch(`output "${name}" is not an output of the model (outputs: ${sig.outputs.map((s) => s.name).join(', ')})`);
  }
  return outputs;
}

/** The outputs to answer as binary data: an output's own `binary_data`, else the request's `binary_data_output`. */
function binaryOutputNames(request: V2Request, sig: ModelSignature): Set<string> {
  const binaryOutputs = new Set<string>();
  const allBinary = request.parameters?.binary_data_output === true;
  for (const o of sig.outputs) {
    const asked = request.outputs?.find((x) => x.name === o.name);
    if (asked?.parameters?.binary_data ?? allBinary) binaryOutputs.add(o.name);
  }
  return binaryOutputs;
}

function parseV2(body: unknown, sig: ModelSignature, binary: Uint8Array): InferRequest {
  const request = v2Request(body);
  const byName = inputsByName(request.inputs, sig);
  const slices = binarySlices(request.inputs, binary);
  const inputs = sig.inputs.map((spec) => v2Tensor(spec, byName.get(spec.name), slices.get(spec.name)));
  const outputs = request.outputs ? askedOutputs(request.outputs, sig) : undefined;
  const binaryOutputs = binaryOutputNames(request, sig);
  return {
    form: 'v2',
    ...(request.id !== undefined ? { id: request.id } : {}),
    inputs,
    ...(outputs ? { outputs } : {}),
    ...(binaryOutputs.size > 0 ? { binaryOutputs } : {}),
    rows: sharedRows(inputs),
  };
}

/** The shape of nested arrays, read down their first elements; the rows must all have it. */
function firstShape(rows: readonly unknown[]): number[] {
  const shape: number[] = [];
  let v: unknown = rows;
  while (Array.isArray(v)) {
    if (shape.length === MAX_TENSOR_RANK) throw tooDeep('the rows');
    shape.push(v.length);
    v = v[0];
  }
  return shape;
}

/** Pushes the values of `v`, an array at `depth` of `shape`, onto `out`; false when it does not have the shape. */
function shapedValues(v: unknown, shape: readonly number[], depth: number, out: unknown[]): boolean {
  if (depth === shape.length) {
    if (Array.isArray(v)) return false;
    out.push(v);
    return true;
  }
  if (!Array.isArray(v) || v.length !== shape[depth]) return false;
  for (const item of v) if (!shapedValues(item, shape, depth + 1, out)) return false;
  return true;
}

/**
 * The shape and values of rows, visiting each array and value once (checking every row
 * against every other by their shapes took time doubling with each level of nesting).
 */
function rowsTensor(rows: readonly unknown[]): { shape: number[]; values: unknown[] } {
  const shape = firstShape(rows);
  const values: unknown[] = [];
  if (!shapedValues(rows, shape, 0, values)) throw new ModelmuxError('invalid_request', 'rows are ragged: every row must have the same shape');
  return { shape, values };
}

function parseRows(raw: unknown[], sig: ModelSignature): InferRequest {
  const spec = sig.inputs[0];
  if (!spec || sig.inputs.length !== 1) {
    throw new ModelmuxError('invalid_request', `the rows form is for single-input models; this model has inputs ${sig.inputs.map((s) => s.name).join(', ')}: use {"inputs":[…]}`);
  }
  // One bare row (a sample) when its depth is one less than the input's rank.
  const { shape, values } = rowsTensor(raw);
  const full = shape.length === spec.shape.length - 1 ? [1, ...shape] : shape;
  const tensor = tensorFor(spec, full, values);
  return { form: 'rows', inputs: [tensor], rows: tensor.dims[0] };
}

/**
 * Parses any accepted body form against the model's signature. `binary` is what followed the
 * JSON when the request used the binary tensor data extension (`Inference-Header-Content-Length`).
 */
export function parseInferBody(body: unknown, sig: ModelSignature, binary: Uint8Array = new Uint8Array(0)): InferRequest {
  if (binary.length > 0 && !(typeof body === 'object' && body !== null && 'inputs' in body)) {
    throw new ModelmuxError('invalid_request', 'binary tensor data needs an Open Inference Protocol request header');
  }
  if (Array.isArray(body)) return parseRows(body, sig);
  if (typeof body === 'object' && body !== null) {
    if ('inputs' in body) return parseV2(body, sig, binary);
    if ('instances' in body) {
      const instances = body.instances;
      if (!Array.isArray(instances)) throw new ModelmuxError('invalid_request', '"instances" must be an array of rows');
      return parseRows(instances, sig);
    }
  }
  throw new ModelmuxError('invalid_request', 'the body must be {"inputs":[…]} (Open Inference Protocol), {"instances":[row, …]} or an array of rows');
}

export interface OutputTensor extends HostTensor {
  name: string;
}

function nest(values: readonly unknown[], dims: readonly number[]): unknown[] {
  if (dims.length <= 1) return [...values];
  const per = values.length / (dims[0] || 1);
  const out: unknown[] = [];
  for (let i = 0; i < (dims[0] ?? 0); i++) out.push(nest(values.slice(i * per, (i + 1) * per), dims.slice(1)));
  return out;
}

/** A response: the JSON, and the binary output data that follows it when any was asked for. */
export interface InferResponse {
  json: unknown;
  binary?: Uint8Array[];
  /**
   * The engine's V2 answer before it was written out: its head and its output tensors, which the
   * gRPC form reads (common/grpc/grpc-response.ts) rather than the JSON and bytes back. Absent
   * from a sidecar runtime's answer, which is only its JSON and bytes.
   */
  tensors?: { model_name: string; model_version?: string; id?: string; outputs: readonly OutputTensor[] };
}

export function inferResponseBody(req: InferRequest, modelId: string, outputs: readonly OutputTensor[]): InferResponse {
  const chosen = req.outputs ? outputs.filter((o) => req.outputs?.includes(o.name)) : outputs;
  if (req.form === 'v2') {
    const binary: Uint8Array[] = [];
    const { base, version } = splitModelId(modelId);
    const head = {
      model_name: base,
      // The default version has no number (docs/adr/0033-model-versions.md).
      ...(version !== undefined ? { model_version: version } : {}),
      ...(req.id !== undefined ? { id: req.id } : {}),
    };
    const json = {
      ...head,
      outputs: chosen.map((o) => {
        if (!req.binaryOutputs?.has(o.name)) return { name: o.name, datatype: o.datatype, shape: o.dims, data: toJsonValues(o) };
        const bytes = tensorBytes(o);
        binary.push(bytes);
        return { name: o.name, datatype: o.datatype, shape: o.dims, parameters: { binary_data_size: bytes.length } };
      }),
    };
    const tensors = { ...head, outputs: chosen };
    return binary.length > 0 ? { json, binary, tensors } : { json, tensors };
  }
  const perOutput = chosen.map((o) => ({ name: o.name, rows: o.dims.length === 0 ? [toJsonValues(o)] : nest(toJsonValues(o), o.dims) }));
  const n = Math.max(0, ...perOutput.map((o) => o.rows.length));
  const only = perOutput.length === 1 ? perOutput[0] : undefined;
  const predictions = only ? only.rows : Array.from({ length: n }, (_, i) => Object.fromEntries(perOutput.map((o) => [o.name, o.rows[i]])));
  return { json: { predictions } };
}

/**
 * `GET /v2/models/:id`: metadata from the model's inputs and outputs. `versions`: those a request
 * may name (a version's own, or the store's for the default version); undefined when unknown.
 */
export function modelMetadataBody(modelId: string, sig: ModelSignature, versions: readonly string[] | undefined): unknown {
  return {
    name: splitModelId(modelId).base,
    ...(versions !== undefined ? { versions } : {}),
    platform: 'onnxruntime_onnx',
    inputs: sig.inputs.map((s) => ({ name: s.name, datatype: s.datatype, shape: s.shape })),
    outputs: sig.outputs.map((s) => ({ name: s.name, datatype: s.datatype, shape: s.shape })),
    // Not part of the protocol: clients ignore it; people reading the metadata learn what is left out.
    ...(sig.unserved?.length ? { unserved_outputs: sig.unserved } : {}),
  };
}
