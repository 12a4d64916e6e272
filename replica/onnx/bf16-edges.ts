import { ModelmuxError } from '../../common/errors.js';
import { ONNX_ELEM_TYPE } from '../../common/onnx-writer.js';
import { ProtoError, protoFields, ProtoWriter, WIRE_LEN, WIRE_VARINT, type ProtoField } from '../../common/proto-wire.js';
import type { OutputTensor } from '../../common/inference-body.js';
import type { ModelSession } from './model-session.js';
import { GRAPH, modelGraph, text, valueInfoName, withGraph } from './shared-graph.js';
import { toBfloat16Bits, type HostTensor } from '../../common/tensor.js';

/**
 * onnxruntime-node 1.30 opens no model whose graph inputs or outputs are bfloat16 ("Unsupported
 * data type: 16"), while bfloat16 inside a graph runs. So such a graph is rewritten at its edges:
 * each bfloat16 input becomes a float32 input of the same name feeding a Cast to bfloat16, and
 * each bfloat16 output the float32 Cast of what the graph computed. float32 holds every bfloat16
 * exactly (its top 16 bits), and a float32 that came from a bfloat16 narrows back to the same
 * bits, so the model still answers bit for bit what it computes, under its own BF16 signature.
 */

/** A graph widened at its bfloat16 edges, and which edges those are. */
export interface Bf16Edges {
  model: Uint8Array;
  inputs: ReadonlySet<string>;
  outputs: ReadonlySet<string>;
}

// onnx.proto field numbers used here (the model's and graph's: shared-graph.ts).
const VALUE_INFO = { name: 1, type: 2 };
const TYPE_TENSOR = 1;
const TENSOR_TYPE_ELEM = 1;
const NODE = { input: 1, output: 2, name: 3, opType: 4, attribute: 5 };
const ATTRIBUTE = { name: 1, i: 3, g: 6, graphs: 11, type: 20 };
const ATTRIBUTE_INT = 2;
const BF16 = ONNX_ELEM_TYPE.bfloat16;
const FLOAT = ONNX_ELEM_TYPE.float32;

/** The elem_type of a tensor ValueInfoProto at `from`–`to`, or undefined for other types. */
function elemType(bytes: Uint8Array, from: number, to: number): number | undefined {
  for (const v of protoFields(bytes, from, to)) {
    if (v.field !== VALUE_INFO.type || v.wire !== WIRE_LEN) continue;
    for (const t of protoFields(bytes, v.valueStart, v.valueEnd)) {
      if (t.field !== TYPE_TENSOR || t.wire !== WIRE_LEN) continue;
      for (const e of protoFields(bytes, t.valueStart, t.valueEnd)) if (e.field === TENSOR_TYPE_ELEM && e.wire === WIRE_VARINT) return e.int;
    }
  }
  return undefined;
}

/** The fields of the message at `from`–`to`, with `rewrite` applied to those it answers for. */
function rewriteFields(bytes: Uint8Array, from: number, to: number, rewrite: (f: ProtoField, w: ProtoWriter) => boolean): Uint8Array {
  const w = new ProtoWriter();
  for (const f of protoFields(bytes, from, to)) if (!rewrite(f, w)) w.raw(bytes.subarray(f.start, f.end));
  return w.finish();
}

/** The ValueInfoProto at `from`–`to` with its tensor elem_type set to float32, its shape kept. */
function asFloat(bytes: Uint8Array, from: number, to: number): Uint8Array {
  return rewriteFields(bytes, from, to, (v, w) => {
    if (v.field !== VALUE_INFO.type || v.wire !== WIRE_LEN) return false;
    w.bytes(
      VALUE_INFO.type,
      rewriteFields(bytes, v.valueStart, v.valueEnd, (t, tw) => {
        if (t.field !== TYPE_TENSOR || t.wire !== WIRE_LEN) return false;
        tw.bytes(
          TYPE_TENSOR,
          new ProtoWriter()
            .int(TENSOR_TYPE_ELEM, FLOAT)
            .raw(rewriteFields(bytes, t.valueStart, t.valueEnd, (e) => e.field === TENSOR_TYPE_ELEM))
            .finish(),
        );
        return true;
      }),
    );
    return true;
  });
}

function castNode(w: ProtoWriter, input: string, output: string, to: number): void {
  w.message(GRAPH.node, (n) =>
    n
      .string(NODE.input, input)
      .string(NODE.output, output)
      .string(NODE.name, `modelmux_cast_${output}`)
      .string(NODE.opType, 'Cast')
      .message(NODE.attribute, (a) => a.string(ATTRIBUTE.name, 'to').int(ATTRIBUTE.i, to).int(ATTRIBUTE.type, ATTRIBUTE_INT)),
  );
}

/** The node at `from`–`to` with its inputs and outputs renamed by `renames`. */
function renamedNode(bytes: Uint8Array, from: number, to: number, renames: ReadonlyMap<string, string>): Uint8Array {
  return rewriteFields(bytes, from, to, (f, w) => {
    if ((f.field !== NODE.input && f.field !== NODE.output) || f.wire !== WIRE_LEN) return false;
    const renamed = renames.get(text(bytes, f.valueStart, f.valueEnd));
    if (renamed === undefined) return false;
    w.string(f.field, renamed);
    return true;
  });
}

const unservable = (why: string): ModelmuxError =>
  new ModelmuxError('model_load_failed', `onnxruntime-node cannot open a model with a bfloat16 input or output, and the replica cannot widen this one to float32: ${why}`);

/**
 * `model` with its bfloat16 graph inputs and outputs widened to float32 (see above), or
 * undefined when it has none. Throws model_load_failed saying why when it has some that cannot
 * be widened: the graph holds subgraphs (names inside them are not renamed here), or an output
 * is not computed by a node of the graph.
 */
export function widenBf16Edges(model: Uint8Array): Bf16Edges | undefined {
  try {
    return widened(model);
  } catch (err) {
    // Bytes that are no model: onnxruntime's own refusal says more.
    if (err instanceof ProtoError || err instanceof TypeError) return undefined;
    throw err;
  }
}

/** The names of the graph's `field` (inputs or outputs) that are bfloat16 tensors. */
function bf16Names(model: Uint8Array, fields: readonly ProtoField[], field: number): Set<string> {
  return new Set(fields.filter((f) => f.field === field && f.wire === WIRE_LEN && elemType(model, f.valueStart, f.valueEnd) === BF16).map((f) => valueInfoName(model, f.valueStart, f.valueEnd) ?? ''));
}

function holdsSubgraph(model: Uint8Array, attribute: ProtoField): boolean {
  for (const a of protoFields(model, attribute.valueStart, attribute.valueEnd)) if (a.field === ATTRIBUTE.g || a.field === ATTRIBUTE.graphs) return true;
  return false;
}

/** Every name the graph's nodes use, and those they compute; throws when a node holds a subgraph. */
function nodeNames(model: Uint8Array, fields: readonly ProtoField[]): { used: Set<string>; produced: Set<string> } {
  const used = new Set<string>();
  const produced = new Set<string>();
  for (const n of fields) {
    if (n.field !== GRAPH.node || n.wire !== WIRE_LEN) continue;
    for (const f of protoFields(model, n.valueStart, n.valueEnd)) {
      if (f.wire !== WIRE_LEN) continue;
      if (f.field === NODE.input || f.field === NODE.output) used.add(text(model, f.valueStart, f.valueEnd));
      if (f.field === NODE.output) produced.add(text(model, f.valueStart, f.valueEnd));
      if (f.field === NODE.attribute && holdsSubgraph(model, f)) throw unservable('the graph holds subgraphs');
    }
  }
  return { used, produced };
}

/** The bfloat16 name each widened edge gives the graph inside: `<name>__bf16`, with `_` added until it is free. */
function edgeRenames(inputs: ReadonlySet<string>, outputs: ReadonlySet<string>, used: ReadonlySet<string>): Map<string, string> {
  const renames = new Map<string, string>();
  for (const name of [...inputs, ...outputs]) {
    let renamed = `${name}__bf16`;
    while (used.has(renamed) || inputs.has(renamed) || outputs.has(renamed)) renamed += '_';
    renames.set(name, renamed);
  }
  return renames;
}

/** A graph field other than a node: a bfloat16 edge widened, an annotation of one left out, any other as it was. */
function writeEdgeField(graph: ProtoWriter, model: Uint8Array, f: ProtoField, edges: Pick<Bf16Edges, 'inputs' | 'outputs'>, renames: ReadonlyMap<string, string>): void {
  const named = f.wire === WIRE_LEN && (f.field === GRAPH.input || f.field === GRAPH.output || f.field === GRAPH.valueInfo) ? valueInfoName(model, f.valueStart, f.valueEnd) : undefined;
  if (named !== undefined && f.field === GRAPH.input && edges.inputs.has(named)) graph.bytes(GRAPH.input, asFloat(model, f.valueStart, f.valueEnd));
  else if (named !== undefined && f.field === GRAPH.output && edges.outputs.has(named)) graph.bytes(GRAPH.output, asFloat(model, f.valueStart, f.valueEnd));
  // An annotation of an edge would now contradict its float32 type; onnxruntime infers it again.
  else if (named !== undefined && f.field === GRAPH.valueInfo && renames.has(named)) return;
  else graph.raw(model.subarray(f.start, f.end));
}

/** The graph's fields rewritten: Casts from the widened inputs before the first node, nodes renamed, Casts to the widened outputs last. */
function widenedGraph(model: Uint8Array, fields: readonly ProtoField[], edges: Pick<Bf16Edges, 'inputs' | 'outputs'>, renames: ReadonlyMap<string, string>): Uint8Array {
  const graph = new ProtoWriter();
  let castsIn = false;
  for (const f of fields) {
    if (f.field !== GRAPH.node || f.wire !== WIRE_LEN) {
      writeEdgeField(graph, model, f, edges, renames);
      continue;
    }
    if (!castsIn) for (const name of edges.inputs) castNode(graph, name, renames.get(name) as string, BF16);
    castsIn = true;
    graph.bytes(GRAPH.node, renamedNode(model, f.valueStart, f.valueEnd, renames));
  }
  for (const name of edges.outputs) castNode(graph, renames.get(name) as string, name, FLOAT);
  return graph.finish();
}

function widened(model: Uint8Array): Bf16Edges | undefined {
  const graphField = modelGraph(model);
  if (!graphField) return undefined;
  const fields = [...protoFields(model, graphField.valueStart, graphField.valueEnd)];
  const inputs = bf16Names(model, fields, GRAPH.input);
  const outputs = bf16Names(model, fields, GRAPH.output);
  if (inputs.size === 0 && outputs.size === 0) return undefined;

  const { used, produced } = nodeNames(model, fields);
  for (const name of outputs) {
    if (!produced.has(name)) throw unservable(`output "${name}" is not computed by a node of the graph`);
  }
  const graph = widenedGraph(model, fields, { inputs, outputs }, edgeRenames(inputs, outputs, used));
  return { model: withGraph(model, graphField, graph), inputs, outputs };
}

/** bfloat16 bit patterns as the float32 values they are, exactly. */
export function widenBf16(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  const words = new Uint32Array(out.buffer);
  for (let i = 0; i < bits.length; i++) words[i] = (bits[i] as number) << 16;
  return out;
}

/**
 * float32 values as the nearest bfloat16 bit patterns (ties to even): exact for widened ones.
 * A NaN keeps its sign and the top of its payload, made quiet, rather than becoming one NaN.
 */
export function narrowToBf16(values: Float32Array): Uint16Array {
  const words = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const bits = words[i] as number;
    out[i] = (bits & 0x7fffffff) > 0x7f800000 ? (bits >>> 16) | 0x40 : toBfloat16Bits(values[i] as number);
  }
  return out;
}

/**
 * The model `session` serves, a graph widened by widenBf16Edges, as the model it came from:
 * BF16 in its signature at those edges, its BF16 inputs widened on the way in and its outputs
 * narrowed on the way out.
 */
export function bf16Session(session: ModelSession, edges: Bf16Edges): ModelSession {
  const inputs = session.signature.inputs.map((s) => (edges.inputs.has(s.name) ? { ...s, datatype: 'BF16' as const } : s));
  const outputs = session.signature.outputs.map((s) => (edges.outputs.has(s.name) ? { ...s, datatype: 'BF16' as const } : s));
  return {
    ...session,
    signature: { ...session.signature, inputs, outputs },
    run: async (tensors: readonly HostTensor[]): Promise<OutputTensor[]> => {
      const widened = tensors.map((t, i) => (edges.inputs.has(inputs[i]?.name ?? '') && t.datatype === 'BF16' ? { ...t, datatype: 'FP32' as const, data: widenBf16(t.data as Uint16Array) } : t));
      const answers = await session.run(widened);
      return answers.map((o) => (edges.outputs.has(o.name) && o.data instanceof Float32Array ? { ...o, datatype: 'BF16' as const, data: narrowToBf16(o.data) } : o));
    },
  };
}
