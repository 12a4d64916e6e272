import { inferenceServiceDefinition } from '../../common/grpc/inference-service.js';

/** A request message of `method` as a protobuf encoder writes it (proto-loader's, as grpc-js clients do). */
export function encodeRequest(method: string, message: unknown): Buffer {
  return (inferenceServiceDefinition()[method] as { requestSerialize(v: unknown): Buffer }).requestSerialize(message);
}

/** A ModelInfer of the `identity` model (test/helpers/datatype-models.ts, FP32) on `rows` rows of 3, as raw contents: 12 bytes a row in, and out. */
export function identityInfer(rows: number): Buffer {
  return encodeRequest('ModelInfer', { model_name: 'identity', inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 3] }], raw_input_contents: [Buffer.alloc(12 * rows, 1)] });
}

/** Issue 47's message: a model name, then two million empty `inputs` entries (4 MB). */
export function inputsBomb(model: string): Buffer {
  return Buffer.concat([encodeRequest('ModelInfer', { model_name: model }), Buffer.alloc(4_000_000).fill(Buffer.from([0x2a, 0x00]))]);
}
