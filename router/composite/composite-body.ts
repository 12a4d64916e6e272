import { z } from 'zod';
import { ModelmuxError, type ErrorCode, ERROR_CATALOGUE } from '../../common/errors.js';
import { parseJsonBody } from '../../common/json-body.js';
import { decodeRequest, encodeResponse, type ModelInferRequest } from '../../common/grpc/inference-service.js';
import { grpcInferResponse } from '../../common/grpc/grpc-response.js';
import { grpcInferBody } from '../../common/grpc/grpc-request.js';
import { binarySlices, v2RequestSchema } from '../../common/inference-body.js';
import { jsonFloat, MAX_TENSOR_RANK, tensorBytes, tensorFromBinary, toJsonValues, typedArrayFrom, V2_DATATYPES, type V2Datatype } from '../../common/tensor.js';
import type { V2Tensor } from './tensor-combine.js';

/**
 * The bodies a composite route reads and writes, pure: the client's request (parsed with the
 * replica's own nesting bound and envelope schema, so router and replica refuse the same
 * bodies), its members' answers and metadata, and the answer it writes. The client's request is
 * Open Inference Protocol JSON, with or without the binary tensor data extension, or a gRPC
 * ModelInferRequest (typed or raw contents); whichever it is, its tensors are read into JSON
 * values once, members are sent JSON (ADR 0050), and the answer is written in the client's form.
 * The row forms are refused with 400 `invalid_request` (their answers have no output names to
 * combine or map).
 */

export type V2Request = z.infer<typeof v2RequestSchema>;

const FLOATS: ReadonlySet<string> = new Set(['FP32', 'FP64']);

/** How the client's request came, and so how its answer goes. */
export type ClientForm =
  /** V2 JSON; `inferenceHeaderLength`: the binary extension's `inference-header-content-length`, if given. */
  | { kind: 'http'; inferenceHeaderLength: string | undefined }
  /** A gRPC ModelInferRequest message. */
  | { kind: 'grpc' };

/** How the answer is written: V2 JSON, its outputs as binary data where asked (HTTP), or a ModelInferResponse (raw contents if the call sent raw). */
export type AnswerForm = { kind: 'http'; binaryDefault: boolean; binaryByName: ReadonlyMap<string, boolean> } | { kind: 'grpc'; raw: boolean };

/** The client's request, read. */
export interface CompositeRequestBody {
  /** Every input with its `data`, no parameter of the binary extension left: what members are sent. */
  request: V2Request;
  answer: AnswerForm;
  /** The client's body is that request already (plain JSON): members may be sent its bytes. */
  plain: boolean;
}

/** The client's request body, checked, its tensors read. */
export function parseCompositeRequest(body: Buffer, form: ClientForm): CompositeRequestBody {
  if (form.kind === 'grpc') {
    const call = decodeRequest<ModelInferRequest>('ModelInfer', body);
    // Raw contents are read as JSON data; binary_data_output is the replica's own ask of itself.
    const { body: v2, raw } = grpcInferBody(call, false);
    const { binary_data_output: _asked, ...parameters } = (v2['parameters'] ?? {}) as Record<string, unknown>;
    const request = checked({ ...v2, parameters });
    // Typed float contents may hold NaN and infinities, which JSON writes as the V2 strings.
    for (const input of request.inputs) if (FLOATS.has(input.datatype) && input.data !== undefined) input.data = input.data.map((v) => (typeof v === 'number' ? jsonFloat(v) : v));
    return { request, answer: { kind: 'grpc', raw }, plain: false };
  }
  const { json, binary } = splitBinary(body, form.inferenceHeaderLength);
  const given = checked(json);
  const slices = binarySlices(given.inputs, binary);
  const inputs = given.inputs.map((input) => {
    const bytes = slices.get(input.name);
    if (bytes === undefined) return input;
    if (!(V2_DATATYPES as readonly string[]).includes(input.datatype)) throw new ModelmuxError('invalid_request', `input "${input.name}" has datatype ${input.datatype} (unknown)`);
    const tensor = tensorFromBinary(input.datatype as V2Datatype, input.shape, bytes);
    if (typeof tensor === 'string') throw new ModelmuxError('invalid_request', `input "${input.name}": ${tensor}`);
    const { binary_data_size: _size, ...parameters } = input.parameters ?? {};
    return { ...input, parameters, data: toJsonValues(tensor) };
  });
  for (const input of inputs) if (input.data === undefined) throw new ModelmuxError('invalid_request', `input "${input.name}" has no data`);
  const binaryByName = new Map((given.outputs ?? []).flatMap((o) => (o.parameters?.binary_data === undefined ? [] : [[o.name, o.parameters.binary_data] as const])));
  const binaryDefault = given.parameters?.binary_data_output === true;
  const plain = slices.size === 0 && binaryByName.size === 0 && given.parameters?.binary_data_output === undefined;
  if (plain) return { request: given, answer: { kind: 'http', binaryDefault, binaryByName }, plain };
  const { binary_data_output: _output, ...parameters } = given.parameters ?? {};
  const outputs = given.outputs?.map((o) => {
    const { binary_data: _binary, ...rest } = o.parameters ?? {};
    return { ...o, parameters: rest };
  });
  return { request: { ...given, parameters, inputs, ...(outputs === undefined ? {} : { outputs }) }, answer: { kind: 'http', binaryDefault, binaryByName }, plain };
}

/** The JSON of a body and the binary data after it (the extension's `inference-header-content-length` says where the JSON ends). */
function splitBinary(body: Buffer, inferenceHeaderLength: string | undefined): { json: unknown; binary: Uint8Array } {
  if (inferenceHeaderLength === undefined) return { json: parseJsonBody(body), binary: new Uint8Array(0) };
  const length = Number(inferenceHeaderLength);
  if (!Number.isInteger(length) || length < 0 || length > body.length) throw new ModelmuxError('invalid_request', 'inference-header-content-length is not a length within the body');
  return { json: parseJsonBody(body.subarray(0, length)), binary: body.subarray(length) };
}

/** A V2 request checked against the envelope schema; not the row forms. */
function checked(json: unknown): V2Request {
  if (typeof json !== 'object' || json === null || Array.isArray(json) || !('inputs' in json)) {
    throw new ModelmuxError('invalid_request', 'a composite route (ensemble or sequence) takes an Open Inference Protocol body {"inputs":[…]}, not rows');
  }
  const r = v2RequestSchema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new ModelmuxError('invalid_request', `not an inference request: ${issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : 'invalid'}`);
  }
  return r.data;
}

/** The request's inputs as tensors a later step may read (data as given, flattened). */
export function requestTensors(request: V2Request): V2Tensor[] {
  return request.inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: i.shape, data: flatten(i.data ?? [], `input "${i.name}"`) }));
}

/**
 * Values of nested arrays in order, at most MAX_TENSOR_RANK arrays deep: flat data as it is, nested
 * data by the engine's own `flat`, faster than a walk in JavaScript.
 */
function flatten(data: unknown[], what: string): unknown[] {
  if (!data.some(Array.isArray)) return data;
  const flat: unknown[] = data.flat(MAX_TENSOR_RANK - 1);
  if (flat.some(Array.isArray)) throw new Error(`the data of ${what} nests arrays more than ${MAX_TENSOR_RANK} deep`);
  return flat;
}

const answerTensorSchema = z.object({
  name: z.string().min(1),
  datatype: z.string().min(1),
  shape: z.array(z.number().int().nonnegative()).max(MAX_TENSOR_RANK),
  // Its values are walked once, by flatten: z.array would copy the array, a value at a time.
  data: z.custom<unknown[]>((v) => Array.isArray(v), { message: 'Invalid input: expected array' }),
});

const answerSchema = z.object({ outputs: z.array(answerTensorSchema) });

/**
 * A JSON answer of a member (an inference answer, model metadata) checked by `schema`; throws a
 * plain Error saying what `what` is not.
 */
export function parseAnswer<T>(schema: z.ZodType<T>, body: Buffer, what: string): T {
  let json: unknown;
  try {
    json = parseJsonBody(body);
  } catch {
    throw new Error(`the ${what} is not JSON`);
  }
  const r = schema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new Error(`the ${what} is not an Open Inference Protocol ${what} (${issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : 'invalid'})`);
  }
  return r.data;
}

/** A member's 200 answer: its outputs, data flattened. Throws a plain Error saying what is wrong. */
export function parseInferAnswer(body: Buffer): V2Tensor[] {
  return parseAnswer(answerSchema, body, 'answer').outputs.map((o) => ({ ...o, data: flatten(o.data, `output "${o.name}"`) }));
}

/** The code and message of an error answer of router or replica; a body without a known code is `upstream_unavailable`. */
export function errorOfAnswer(status: number, body: Buffer): { code: ErrorCode; message: string } {
  try {
    const json = JSON.parse(body.toString('utf8')) as { error?: unknown; message?: unknown };
    if (typeof json.error === 'string' && json.error in ERROR_CATALOGUE) return { code: json.error as ErrorCode, message: typeof json.message === 'string' ? json.message : json.error };
  } catch {
    // not JSON: described below
  }
  return { code: 'upstream_unavailable', message: `answered ${status} without a modelmux error body` };
}

/** A composite's answer as it is sent: its bytes and their content type; `headerLength`: the bytes of its JSON when binary outputs follow it. */
export interface WrittenAnswer {
  bytes: Uint8Array;
  contentType: string;
  headerLength?: number;
}

/** The answer of a composite route (`name`) in the client's form; `members`: the models that made it. */
export function writeAnswer(form: AnswerForm, name: string, id: string | undefined, outputs: readonly V2Tensor[], members: readonly string[]): WrittenAnswer {
  if (form.kind === 'grpc') {
    const message = grpcInferResponse({ json: { model_name: name, ...(id !== undefined ? { id } : {}), outputs } }, name, form.raw);
    const bytes = encodeResponse('ModelInfer', { ...message, parameters: { members: { string_param: members.join(',') } } });
    return { bytes: owned(bytes), contentType: 'application/grpc' };
  }
  const parts: Uint8Array[] = [];
  const written = outputs.map((o) => {
    if (!(form.binaryByName.get(o.name) ?? form.binaryDefault)) return o;
    const bytes = binaryData(o);
    parts.push(bytes);
    return { name: o.name, datatype: o.datatype, shape: o.shape, parameters: { binary_data_size: bytes.length } };
  });
  const json = encode({ model_name: name, ...(id !== undefined ? { id } : {}), outputs: written, parameters: { members } });
  if (parts.length === 0) return { bytes: json, contentType: 'application/json' };
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, json.length));
  bytes.set(json);
  let at = json.length;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return { bytes, contentType: 'application/octet-stream', headerLength: json.length };
}

/** An output's elements as the binary extension lays them out (little-endian; BYTES length-prefixed). */
function binaryData(o: V2Tensor): Uint8Array {
  const datatype = o.datatype as V2Datatype;
  const data = (V2_DATATYPES as readonly string[]).includes(datatype) ? typedArrayFrom(datatype, o.data) : `its datatype ${o.datatype} is unknown`;
  if (typeof data === 'string') throw new ModelmuxError('inference_failed', `output "${o.name}" cannot be sent as binary data: ${data}`);
  return tensorBytes({ datatype, dims: o.shape, data });
}

/** Bytes in an ArrayBuffer of their own, so a worker can hand them over without a copy. */
function owned(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : new Uint8Array(bytes);
}

/** JSON bytes of a request or answer, in an ArrayBuffer of their own. */
export function encode(value: unknown): Uint8Array {
  return new TextEncoder().encode(stringify(value));
}

/** JSON.rawJSON (Node 21+): integers past 2^53 written exactly; ES2023's types lack it. */
const rawJSON = (JSON as unknown as { rawJSON: (text: string) => unknown }).rawJSON;

/**
 * JSON text of a request or answer whose tensors may hold bigints (INT64 past 2^53). The replacer
 * that writes them makes JSON.stringify five times slower, so it is only used once the plain
 * call has met one (it throws a TypeError on a bigint).
 */
export function stringify(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
  }
  return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? rawJSON(v.toString()) : v));
}
