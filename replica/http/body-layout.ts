/**
 * Where an inference request's body is put in memory, pure. The binary tensor data extension puts
 * tensors right after the JSON, at whatever offset its length leaves them; a typed array must
 * start at a multiple of its element size, so the body is placed that many bytes into its
 * buffer that its binary part starts on an 8-byte boundary (the largest element). The first
 * tensor is then always a view in place; a later one is too when the tensors before it are whole
 * elements of its size, and is copied only when not (common/tensor.ts `viewsInPlace`).
 */

/** Open Inference Protocol binary tensor data extension: length of the JSON part of the body. */
export const HEADER_INFERENCE_HEADER_LENGTH = 'inference-header-content-length';

/** The largest element size of a V2 datatype (INT64, UINT64, FP64). */
export const TENSOR_ALIGNMENT = 8;

/**
 * How many bytes into a buffer whose memory starts at `byteOffset` (of its ArrayBuffer) the body
 * goes, so that byte `jsonLength` of the body is aligned. `jsonLength` is the request's
 * Inference-Header-Content-Length: undefined, or not a length within the body (refused later),
 * needs no alignment.
 */
export function bodyPad(byteOffset: number, bodyLength: number, jsonLength: number | undefined): number {
  if (jsonLength === undefined || !Number.isInteger(jsonLength) || jsonLength < 0 || jsonLength > bodyLength) return 0;
  return (TENSOR_ALIGNMENT - ((byteOffset + jsonLength) % TENSOR_ALIGNMENT)) % TENSOR_ALIGNMENT;
}
