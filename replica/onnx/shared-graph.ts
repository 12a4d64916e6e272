import { createHash } from 'node:crypto';
import { ProtoError, ProtoWriter, protoFields, WIRE_LEN, WIRE_VARINT, type ProtoField } from '../../common/proto-wire.js';
import { ONNX_FLOAT, writeValueInfo } from '../../common/onnx-writer.js';

/**
 * Models of the same shape differ only in their weights. Moving every float initializer out of
 * the graph and into a graph input of the same name leaves a weightless graph that all of them
 * share: one onnxruntime session serves every model of that shape, and loading a model becomes
 * reading its file, with no session to create (docs/adr/0016-shared-graph-sessions.md).
 */

/** One weight: an initializer turned into an input, its bytes still inside the model file. */
export interface WeightRef {
  name: string;
  dims: number[];
  /** Where its little-endian float32 `raw_data` lies in the model's bytes. */
  start: number;
  end: number;
}

export interface SplitModel {
  /** A ModelProto with the weights as inputs and without names and docs that vary per model. */
  graph: Uint8Array;
  /** Equal for two models exactly when their graphs are: the key of the shared session. */
  key: string;
  weights: WeightRef[];
}

// onnx.proto field numbers used here.
export const MODEL = { producerName: 2, producerVersion: 3, modelVersion: 5, docString: 6, graph: 7, metadataProps: 14 };
export const GRAPH = { node: 1, name: 2, initializer: 5, docString: 10, input: 11, output: 12, valueInfo: 13 };
export const TENSOR = { dims: 1, dataType: 2, segment: 3, name: 8, rawData: 9, externalData: 13, dataLocation: 14 };
const VALUE_INFO_NAME = 1;
/** Fields that say who made a model, not what it computes: dropped so that equal graphs hash equal. */
const MODEL_LABELS = new Set([MODEL.producerName, MODEL.producerVersion, MODEL.modelVersion, MODEL.docString, MODEL.metadataProps]);
const SHARED_GRAPH_NAME = 'modelmux-shared';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A string field's value (`from`–`to`, its payload), decoded strictly. */
export function text(bytes: Uint8Array, from: number, to: number): string {
  return utf8.decode(bytes.subarray(from, to));
}

/** The name of the ValueInfoProto at `from`–`to`. */
export function valueInfoName(bytes: Uint8Array, from: number, to: number): string | undefined {
  for (const f of protoFields(bytes, from, to)) if (f.field === VALUE_INFO_NAME && f.wire === WIRE_LEN) return text(bytes, f.valueStart, f.valueEnd);
  return undefined;
}

/** The model's graph field (its first), or undefined when it has none. */
export function modelGraph(model: Uint8Array): ProtoField | undefined {
  return [...protoFields(model)].find((f) => f.field === MODEL.graph && f.wire === WIRE_LEN);
}

/** `model` with `graph` in place of the graph at `field` (modelGraph's), every other field as it was. */
export function withGraph(model: Uint8Array, field: ProtoField, graph: Uint8Array): Uint8Array {
  const out = new ProtoWriter();
  for (const f of protoFields(model)) {
    if (f.start === field.start) out.bytes(MODEL.graph, graph);
    else out.raw(model.subarray(f.start, f.end));
  }
  return out.finish();
}

/** The weight a TensorProto (at `from`–`to`) holds, or undefined when it is not one that moves. */
export function readWeight(bytes: Uint8Array, from: number, to: number): WeightRef | undefined {
  let name = '';
  let dataType = 0;
  const dims: number[] = [];
  let raw: { start: number; end: number } | undefined;
  for (const f of protoFields(bytes, from, to)) {
    if (f.field === TENSOR.dims && f.wire === WIRE_VARINT) dims.push(f.int);
    else if (f.field === TENSOR.dims && f.wire === WIRE_LEN) for (const d of packedVarints(bytes, f.valueStart, f.valueEnd)) dims.push(d);
    else if (f.field === TENSOR.dataType) dataType = f.int;
    else if (f.field === TENSOR.name && f.wire === WIRE_LEN) name = text(bytes, f.valueStart, f.valueEnd);
    else if (f.field === TENSOR.rawData && f.wire === WIRE_LEN) raw = { start: f.valueStart, end: f.valueEnd };
    // Split or external tensors stay where they are: onnxruntime knows how to read them.
    else if (f.field === TENSOR.segment || f.field === TENSOR.externalData || (f.field === TENSOR.dataLocation && f.int !== 0)) return undefined;
  }
  if (dataType !== ONNX_FLOAT || name === '' || !raw) return undefined;
  const count = dims.reduce((n, d) => n * d, 1);
  if (raw.end - raw.start !== count * 4) return undefined;
  return { name, dims, ...raw };
}

function* packedVarints(bytes: Uint8Array, from: number, to: number): Generator<number> {
  let value = 0;
  let scale = 1;
  for (let pos = from; pos < to; pos++) {
    const b = bytes[pos] as number;
    value += (b & 0x7f) * scale;
    scale *= 128;
    if ((b & 0x80) === 0) {
      yield value;
      value = 0;
      scale = 1;
    }
  }
}

/** The graph at `from`–`to` under the shared name, without its doc, its inline float initializers moved out as weights and declared as inputs. */
function weightlessGraph(model: Uint8Array, from: number, to: number): { graph: Uint8Array; weights: WeightRef[] } {
  const graph = new ProtoWriter().string(GRAPH.name, SHARED_GRAPH_NAME);
  const inputs = new Set<string>();
  const weights: WeightRef[] = [];
  for (const g of protoFields(model, from, to)) {
    if (g.field === GRAPH.name || g.field === GRAPH.docString) continue;
    const weight = g.field === GRAPH.initializer && g.wire === WIRE_LEN ? readWeight(model, g.valueStart, g.valueEnd) : undefined;
    if (weight) {
      weights.push(weight);
      continue;
    }
    if (g.field === GRAPH.input && g.wire === WIRE_LEN) {
      for (const v of protoFields(model, g.valueStart, g.valueEnd)) {
        if (v.field === VALUE_INFO_NAME && v.wire === WIRE_LEN) inputs.add(text(model, v.valueStart, v.valueEnd));
      }
    }
    graph.raw(model.subarray(g.start, g.end));
  }
  // Before IR version 4 every initializer is also listed as an input: that input stays.
  for (const w of weights) if (!inputs.has(w.name)) graph.message(GRAPH.input, (v) => writeValueInfo(v, { name: w.name, shape: w.dims }));
  return { graph: graph.finish(), weights };
}

/**
 * Splits an ONNX model into a shared graph and its weights, or answers undefined when there is
 * nothing to share (no float initializer held inline) or the bytes are not a well-formed model:
 * the caller then opens the file as a model of its own, and onnxruntime gives the real error.
 */
export function splitWeights(model: Uint8Array): SplitModel | undefined {
  try {
    const out = new ProtoWriter();
    let weights: WeightRef[] | undefined;
    for (const f of protoFields(model)) {
      if (MODEL_LABELS.has(f.field)) continue;
      if (f.field !== MODEL.graph || f.wire !== WIRE_LEN) {
        out.raw(model.subarray(f.start, f.end));
        continue;
      }
      if (weights) return undefined; // two graphs: not a model onnxruntime would load either
      const shared = weightlessGraph(model, f.valueStart, f.valueEnd);
      weights = shared.weights;
      out.bytes(MODEL.graph, shared.graph);
    }
    if (!weights || weights.length === 0) return undefined;
    if (new Set(weights.map((w) => w.name)).size !== weights.length) return undefined;
    const bytes = out.finish();
    return { graph: bytes, key: createHash('sha256').update(bytes).digest('hex'), weights };
  } catch (err) {
    if (err instanceof ProtoError || err instanceof TypeError) return undefined;
    throw err;
  }
}
