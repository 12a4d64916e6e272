import { z } from 'zod';
import { ModelmuxError, type ErrorCode, ERROR_CATALOGUE } from '../../common/errors.js';
import { parseJsonBody } from '../../common/json-body.js';
import { v2RequestSchema } from '../../common/inference-body.js';
import { MAX_TENSOR_RANK } from '../../common/tensor.js';
import type { V2Tensor } from './tensor-combine.js';

/**
 * The JSON a composite route reads and writes, pure: the client's request (parsed with the
 * replica's own nesting bound and envelope schema, so router and replica refuse the same
 * bodies), its members' answers and metadata, and the answer it writes. Only Open Inference
 * Protocol JSON is taken: the binary tensor data extension is refused with 415
 * `composite_binary_unsupported` (its tensors would have to be cut out of and spliced into
 * the byte stream for every member), and the row forms with 400 `invalid_request` (their
 * answers have no output names to combine or map).
 */

export type V2Request = z.infer<typeof v2RequestSchema>;

/** The client's request body, checked. `inferenceHeaderLength`: the binary extension's `inference-header-content-length`, if given. */
export function parseCompositeRequest(body: Buffer, inferenceHeaderLength: string | undefined): V2Request {
  if (inferenceHeaderLength !== undefined) throw binaryRefused('the request has an inference-header-content-length header');
  const json = parseJsonBody(body);
  if (typeof json !== 'object' || json === null || Array.isArray(json) || !('inputs' in json)) {
    throw new ModelmuxError('invalid_request', 'a composite route (ensemble or sequence) takes an Open Inference Protocol body {"inputs":[…]}, not rows');
  }
  const r = v2RequestSchema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new ModelmuxError('invalid_request', `not an inference request: ${issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : 'invalid'}`);
  }
  const v = r.data;
  const binaryInput = v.inputs.find((i) => i.parameters?.binary_data_size !== undefined);
  if (binaryInput !== undefined) throw binaryRefused(`input "${binaryInput.name}" has binary_data_size`);
  if (v.parameters?.binary_data_output === true || v.outputs?.some((o) => o.parameters?.binary_data === true)) throw binaryRefused('the request asks for binary output data');
  for (const input of v.inputs) if (input.data === undefined) throw new ModelmuxError('invalid_request', `input "${input.name}" has no data`);
  return v;
}

function binaryRefused(why: string): ModelmuxError {
  return new ModelmuxError('composite_binary_unsupported', `${why}: a composite route (ensemble or sequence) takes JSON tensors only, not the binary tensor data extension`);
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
