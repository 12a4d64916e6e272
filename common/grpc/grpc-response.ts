import { z } from 'zod';
import { ModelmuxError } from '../errors.js';
import type { AnswerContents, ModelInferAnswer, ModelMetadataResponse } from './inference-service.js';
import { CONTENTS_FIELD } from './grpc-request.js';
import type { InferResponse } from '../inference-body.js';
import { elementCount, MAX_TENSOR_RANK, tensorBytes, tensorFromBinary, typedArrayFrom, V2_DATATYPES, type HostTensor, type V2Datatype } from '../tensor.js';

/**
 * The V2 answer of the inference path (engine or sidecar runtime) as a gRPC ModelInferResponse:
 * raw_output_contents when the call sent raw inputs (or an output is FP16/BF16, which has no typed
 * field), typed contents otherwise; the router writes a composite route's answer with it too. Pure.
 */

const outputSchema = z.object({
  name: z.string(),
  datatype: z.enum(V2_DATATYPES),
  shape: z.array(z.number().int().nonnegative()),
  parameters: z.looseObject({ binary_data_size: z.number().int().nonnegative().optional() }).optional(),
  data: z.array(z.unknown()).optional(),
});
const responseSchema = z.object({ model_name: z.string().optional(), model_version: z.string().optional(), id: z.string().optional(), outputs: z.array(outputSchema) });

const badAnswer = (message: string): ModelmuxError => new ModelmuxError('inference_failed', `the inference answer cannot be sent over gRPC: ${message}`);

/** The typed contents of a tensor of a datatype that has a typed field; a numeric tensor's typed array as it is. */
export function typedContents(t: HostTensor): AnswerContents {
  const field = CONTENTS_FIELD[t.datatype];
  const d = t.data;
  if (field === undefined) throw new Error(`${t.datatype} has no typed contents field`);
  if (Array.isArray(d)) {
    const encoder = new TextEncoder();
    return { bytes_contents: d.map((s) => encoder.encode(s)) };
  }
  // Decimal strings: exact past 2^53, as the field's value is read back.
  if (d instanceof BigInt64Array || d instanceof BigUint64Array) return { [field]: Array.from(d, (v) => v.toString()) };
  return { [field]: d };
}

/** One output on its way into the answer: its tensor, or its bytes as binary data carried them. */
interface AnswerOutput {
  name: string;
  datatype: V2Datatype;
  shape: number[];
  tensor?: HostTensor;
  bytes?: Uint8Array;
}

/** One output of a V2 JSON answer: its binary data when it came as such, else its JSON data as a tensor. */
function outputOf(o: z.infer<typeof outputSchema>, binary: Uint8Array, offset: number): AnswerOutput {
  const head = { name: o.name, datatype: o.datatype, shape: o.shape };
  const size = o.parameters?.binary_data_size;
  if (size !== undefined) {
    if (offset + size > binary.length) throw badAnswer(`output "${o.name}" declares binary data past the end of the answer`);
    return { ...head, bytes: binary.subarray(offset, offset + size) };
  }
  // A sidecar runtime may ignore binary_data_output and answer JSON.
  if (o.data === undefined) throw badAnswer(`output "${o.name}" has neither data nor binary_data_size`);
  const data = typedArrayFrom(o.datatype, o.data.flat(MAX_TENSOR_RANK));
  if (typeof data === 'string') throw badAnswer(`output "${o.name}": ${data}`);
  if (data.length !== elementCount(o.shape)) throw badAnswer(`output "${o.name}" has ${data.length} elements for shape [${o.shape.join(',')}]`);
  return { ...head, tensor: { datatype: o.datatype, dims: o.shape, data } };
}

function rawBytes(o: AnswerOutput): Uint8Array {
  return o.bytes ?? (o.tensor === undefined ? new Uint8Array(0) : tensorBytes(o.tensor));
}

function answerOf(
  head: { model_name?: string | undefined; model_version?: string | undefined; id?: string | undefined },
  modelId: string,
  outputs: readonly AnswerOutput[],
  raw: boolean,
): ModelInferAnswer {
  const answerRaw = raw || outputs.some((o) => CONTENTS_FIELD[o.datatype] === undefined);
  return {
    model_name: head.model_name ?? modelId,
    model_version: head.model_version ?? '',
    id: head.id ?? '',
    outputs: outputs.map((o) => {
      const tensor = { name: o.name, datatype: o.datatype, shape: o.shape };
      if (answerRaw) return tensor;
      const t = o.tensor ?? tensorFromBinary(o.datatype, o.shape, o.bytes ?? new Uint8Array(0));
      if (typeof t === 'string') throw badAnswer(`output "${o.name}": ${t}`);
      return { ...tensor, contents: typedContents(t) };
    }),
    raw_output_contents: answerRaw ? outputs.map(rawBytes) : [],
  };
}

/**
 * The engine's answer is read from its tensors (`answer.tensors`), with nothing to check or
 * decode; a sidecar runtime's, from its V2 JSON and binary data, checked first.
 */
export function grpcInferResponse(answer: InferResponse, modelId: string, raw: boolean): ModelInferAnswer {
  const own = answer.tensors;
  if (own !== undefined)
    return answerOf(
      own,
      modelId,
      own.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.dims, tensor: o })),
      raw,
    );
  const parsed = responseSchema.safeParse(answer.json);
  if (!parsed.success) throw badAnswer('it is not a V2 inference answer');
  const parts = answer.binary ?? [];
  const binary = parts.length === 1 && parts[0] !== undefined ? parts[0] : Buffer.concat(parts);
  let offset = 0;
  const outputs = parsed.data.outputs.map((o) => {
    const out = outputOf(o, binary, offset);
    offset += o.parameters?.binary_data_size ?? 0;
    return out;
  });
  return answerOf(parsed.data, modelId, outputs, raw);
}

const metadataSchema = z.object({
  name: z.string(),
  versions: z.array(z.string()).optional(),
  platform: z.string().optional(),
  inputs: z.array(z.object({ name: z.string(), datatype: z.string(), shape: z.array(z.number().int()) })),
  outputs: z.array(z.object({ name: z.string(), datatype: z.string(), shape: z.array(z.number().int()) })),
});

/** The HTTP metadata body (engine or sidecar runtime) as ModelMetadataResponse. */
export function grpcModelMetadata(body: unknown): ModelMetadataResponse {
  const m = metadataSchema.safeParse(body);
  if (!m.success) throw new ModelmuxError('inference_failed', 'the model metadata cannot be sent over gRPC: it is not a V2 metadata answer');
  const tensors = (list: typeof m.data.inputs) => list.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape }));
  return { name: m.data.name, versions: m.data.versions ?? [], platform: m.data.platform ?? '', inputs: tensors(m.data.inputs), outputs: tensors(m.data.outputs) };
}
