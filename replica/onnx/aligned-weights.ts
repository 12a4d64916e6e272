import { ProtoError, protoFields, varintSize, WIRE_LEN, writeVarint, type ProtoField } from '../../common/proto-wire.js';
import { GRAPH, MODEL, readWeight, splitWeights, TENSOR, type SplitModel } from './shared-graph.js';

/**
 * A mapped file's bytes sit where the file puts them: a weight can be viewed as a Float32Array
 * in place only if its offset in the file is a multiple of 4, which a protobuf encoder leaves to
 * chance (the benchmark's models all start their largest weight at an odd offset). Rewriting a
 * downloaded model once, with a padding field before each weight's bytes, puts every weight on
 * a 64-byte boundary; the file stays the same model to onnxruntime and to splitWeights
 * (docs/adr/0021-mapped-weights.md).
 */

export const WEIGHT_ALIGNMENT = 64;

/**
 * A field number onnx.proto does not use in TensorProto. Parsers skip unknown fields, so the
 * padding changes no tensor; a new ONNX field of this number would have to be a bytes field
 * whose content no one reads to break it.
 */
const PAD_FIELD = 19789;

const PAD_TAG = varintSize(PAD_FIELD * 8 + WIRE_LEN);

/** Pieces of the rewritten file in order: bytes copied from the model, or a header written here. */
type Piece = Uint8Array | { tag: number; length: number } | { pad: number };

function pieceSize(p: Piece): number {
  if (p instanceof Uint8Array) return p.length;
  if ('pad' in p) return PAD_TAG + 1 + p.pad;
  return varintSize(p.tag) + varintSize(p.length);
}

/**
 * The initializer field at absolute offset `at` rewritten as: the tensor's other fields, a
 * padding field, then raw_data, with the padding chosen so raw_data's bytes start on a
 * WEIGHT_ALIGNMENT boundary. The tensor's length prefix depends on the padding and the padding
 * on where the prefix ends, so the prefix's size is found by trying the smallest first.
 */
function alignedTensor(model: Uint8Array, tensor: ProtoField, raw: { start: number; end: number }, at: number): Piece[] {
  const kept = [...protoFields(model, tensor.valueStart, tensor.valueEnd)].filter((f) => f.field !== TENSOR.rawData && f.field !== PAD_FIELD);
  const keptBytes = kept.reduce((n, f) => n + f.end - f.start, 0);
  const rawLength = raw.end - raw.start;
  const rawHead = varintSize(TENSOR.rawData * 8 + WIRE_LEN) + varintSize(rawLength);
  const initializerTag = GRAPH.initializer * 8 + WIRE_LEN;
  for (let prefix = varintSize(keptBytes + PAD_TAG + 1 + rawHead + rawLength); ; prefix++) {
    const before = at + varintSize(initializerTag) + prefix + keptBytes + PAD_TAG + 1 + rawHead;
    const pad = (WEIGHT_ALIGNMENT - (before % WEIGHT_ALIGNMENT)) % WEIGHT_ALIGNMENT;
    const length = keptBytes + PAD_TAG + 1 + pad + rawHead + rawLength;
    if (varintSize(length) !== prefix) continue;
    return [
      { tag: initializerTag, length },
      ...kept.map((f) => model.subarray(f.start, f.end)),
      { pad },
      { tag: TENSOR.rawData * 8 + WIRE_LEN, length: rawLength },
      model.subarray(raw.start, raw.end),
    ];
  }
}

/** The graph's fields from absolute offset `at` on, each weight aligned. */
function alignedGraphFields(model: Uint8Array, graph: ProtoField, at: number): Piece[] {
  const pieces: Piece[] = [];
  for (const g of protoFields(model, graph.valueStart, graph.valueEnd)) {
    const weight = g.field === GRAPH.initializer && g.wire === WIRE_LEN ? readWeight(model, g.valueStart, g.valueEnd) : undefined;
    const add = weight ? alignedTensor(model, g, weight, at) : [model.subarray(g.start, g.end)];
    for (const p of add) at += pieceSize(p);
    pieces.push(...add);
  }
  return pieces;
}

function assemble(pieces: readonly Piece[]): Uint8Array {
  const out = new Uint8Array(pieces.reduce((n, p) => n + pieceSize(p), 0));
  let pos = 0;
  for (const p of pieces) {
    if (p instanceof Uint8Array) {
      out.set(p, pos);
      pos += p.length;
    } else if ('pad' in p) {
      pos = writeVarint(out, pos, PAD_FIELD * 8 + WIRE_LEN);
      pos = writeVarint(out, pos, p.pad);
      pos += p.pad; // zeros: a fresh Uint8Array is zero-filled
    } else {
      pos = writeVarint(out, pos, p.tag);
      pos = writeVarint(out, pos, p.length);
    }
  }
  return out;
}

const allAligned = (split: SplitModel | undefined, boundary: number): boolean => split !== undefined && split.weights.every((w) => w.start % boundary === 0);

/** Whether every weight splitWeights would move starts on a `boundary`-byte boundary of `model`. */
export function weightsAligned(model: Uint8Array, boundary: number): boolean {
  return allAligned(splitWeights(model), boundary);
}

/**
 * `model` with every weight splitWeights would move starting on a WEIGHT_ALIGNMENT boundary, or
 * undefined when there is nothing to do: no such weight, already aligned, or not a model this
 * can take apart (the file is then used as it is).
 */
export function alignWeights(model: Uint8Array): Uint8Array | undefined {
  const split = splitWeights(model);
  if (split === undefined || allAligned(split, WEIGHT_ALIGNMENT)) return undefined;
  try {
    const top = [...protoFields(model)];
    const graph = top.find((f) => f.field === MODEL.graph && f.wire === WIRE_LEN);
    if (!graph) return undefined;
    const before = top.filter((f) => f.start < graph.start).reduce((n, f) => n + f.end - f.start, 0);
    const graphTag = MODEL.graph * 8 + WIRE_LEN;
    // The graph's length prefix moves everything inside it: tried from the smallest size up.
    for (let prefix = varintSize(graph.valueEnd - graph.valueStart); prefix <= 10; prefix++) {
      const inner = alignedGraphFields(model, graph, before + varintSize(graphTag) + prefix);
      const length = inner.reduce((n, p) => n + pieceSize(p), 0);
      if (varintSize(length) !== prefix) continue;
      const out = assemble(top.flatMap((f): Piece[] => (f === graph ? [{ tag: graphTag, length }, ...inner] : [model.subarray(f.start, f.end)])));
      return weightsAligned(out, WEIGHT_ALIGNMENT) ? out : undefined;
    }
    return undefined;
  } catch (err) {
    if (err instanceof ProtoError) return undefined;
    throw err;
  }
}
