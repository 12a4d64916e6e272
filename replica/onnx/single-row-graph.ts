import { ProtoError, protoFields, ProtoWriter, WIRE_LEN, WIRE_VARINT, type ProtoField } from '../../common/proto-wire.js';
import { writeValueInfo } from '../../common/onnx-writer.js';
import { GRAPH, modelGraph, text, valueInfoName, withGraph, type SplitModel } from './shared-graph.js';

/**
 * onnxruntime runs a one-row Gemm with MLAS's M=1 kernel, which walks B row by row. When B has
 * a single column (a scalar head: a score, a rating, a regression output) that is K dependent
 * scalar updates: on the 5 MB wine MLP the last layer took 233 µs of a 400 µs run. A [K,1]
 * matrix is, byte for byte, its own transpose [1,K], and with transB=1 the same kernel takes a
 * vectorised dot product instead: the run falls to 0.16 ms. With two rows or more the packed
 * kernel wins untransposed (a batch of 8: 0.66 → 1.4 ms transposed), so a shared graph keeps
 * both: runs of one row go to this variant, batches to the graph as it came
 * (docs/adr/0022-single-row-graphs.md).
 */

export interface SingleRowGraph {
  /** The shared graph with each such Gemm set to transB=1 and its weight declared [1,K]. */
  graph: Uint8Array;
  /** The weights this variant is fed as [1,K], by name, with K. */
  transposed: Map<string, number>;
}

// onnx.proto field numbers used here (the model's and graph's: shared-graph.ts).
const NODE = { input: 1, opType: 4, attribute: 5, domain: 7 };
const ATTRIBUTE = { name: 1, i: 3, g: 6, graphs: 11, type: 20 };
const ATTRIBUTE_INT = 2;

interface NodeInfo {
  gemm: boolean;
  inputs: string[];
  transB: number;
  /** Where the transB attribute field starts, dropped when the node is rewritten. */
  transBStart?: number;
}

/** undefined when the node holds a subgraph: names inside it may use the weights in ways not seen here. */
function readNode(bytes: Uint8Array, from: number, to: number): NodeInfo | undefined {
  const node: NodeInfo = { gemm: false, inputs: [], transB: 0 };
  let opType = '';
  let domain = '';
  for (const f of protoFields(bytes, from, to)) {
    if (f.wire !== WIRE_LEN) continue;
    if (f.field === NODE.input) node.inputs.push(text(bytes, f.valueStart, f.valueEnd));
    else if (f.field === NODE.opType) opType = text(bytes, f.valueStart, f.valueEnd);
    else if (f.field === NODE.domain) domain = text(bytes, f.valueStart, f.valueEnd);
    else if (f.field === NODE.attribute) {
      let name = '';
      let value = 0;
      for (const a of protoFields(bytes, f.valueStart, f.valueEnd)) {
        if (a.field === ATTRIBUTE.g || a.field === ATTRIBUTE.graphs) return undefined;
        if (a.field === ATTRIBUTE.name && a.wire === WIRE_LEN) name = text(bytes, a.valueStart, a.valueEnd);
        else if (a.field === ATTRIBUTE.i && a.wire === WIRE_VARINT) value = a.int;
      }
      if (name === 'transB') {
        node.transB = value;
        node.transBStart = f.start;
      }
    }
  }
  node.gemm = opType === 'Gemm' && (domain === '' || domain === 'ai.onnx');
  return node;
}

/**
 * The single-row variant of a shared graph, or undefined when no weight of shape [K,1] is used
 * only as B of Gemms without transB (or the graph holds subgraphs, which are left alone).
 */
export function singleRowGraph(split: SplitModel): SingleRowGraph | undefined {
  try {
    return singleRowVariant(split);
  } catch (err) {
    if (err instanceof ProtoError || err instanceof TypeError) return undefined;
    throw err;
  }
}

function singleRowVariant(split: SplitModel): SingleRowGraph | undefined {
  const model = split.graph;
  const columns = new Map(split.weights.filter((w) => w.dims.length === 2 && w.dims[1] === 1).map((w) => [w.name, w.dims[0] as number]));
  if (columns.size === 0) return undefined;
  const graphField = modelGraph(model);
  if (!graphField) return undefined;
  const fields = [...protoFields(model, graphField.valueStart, graphField.valueEnd)];
  const nodes = readNodes(model, fields);
  if (!nodes) return undefined;
  const transposed = transposable(model, fields, nodes, columns);
  if (transposed.size === 0) return undefined;
  const graph = new ProtoWriter();
  for (const f of fields) writeField(graph, model, f, nodes, transposed);
  return { graph: withGraph(model, graphField, graph.finish()), transposed };
}

/** The graph's nodes, by where each node's field starts; undefined when one holds a subgraph. */
function readNodes(model: Uint8Array, fields: readonly ProtoField[]): Map<number, NodeInfo> | undefined {
  const nodes = new Map<number, NodeInfo>();
  for (const f of fields) {
    if (f.field !== GRAPH.node || f.wire !== WIRE_LEN) continue;
    const node = readNode(model, f.valueStart, f.valueEnd);
    if (!node) return undefined;
    nodes.set(f.start, node);
  }
  return nodes;
}

/**
 * The weights of `columns` ([K,1], with K) to feed as [1,K]: a weight qualifies when every use
 * of it is as B of a Gemm that does not transpose B, and it is no output of the graph.
 */
function transposable(model: Uint8Array, fields: readonly ProtoField[], nodes: ReadonlyMap<number, NodeInfo>, columns: ReadonlyMap<string, number>): Map<string, number> {
  const transposed = new Map<string, number>();
  const otherUses = new Set<string>();
  for (const node of nodes.values()) {
    node.inputs.forEach((name, i) => {
      const k = columns.get(name);
      if (k === undefined) return;
      if (node.gemm && i === 1 && node.transB === 0) transposed.set(name, k);
      else otherUses.add(name);
    });
  }
  for (const name of otherUses) transposed.delete(name);
  for (const f of fields) {
    if (f.field === GRAPH.output && f.wire === WIRE_LEN) transposed.delete(valueInfoName(model, f.valueStart, f.valueEnd) ?? '');
  }
  return transposed;
}

/** One field of the single-row graph: such a Gemm set to transB=1, such a weight declared [1,K], any other as it was. */
function writeField(graph: ProtoWriter, model: Uint8Array, f: ProtoField, nodes: ReadonlyMap<number, NodeInfo>, transposed: ReadonlyMap<string, number>): void {
  const node = f.field === GRAPH.node ? nodes.get(f.start) : undefined;
  const named = f.field === GRAPH.input || f.field === GRAPH.valueInfo ? valueInfoName(model, f.valueStart, f.valueEnd) : undefined;
  if (node?.gemm && transposed.has(node.inputs[1] ?? '')) graph.bytes(GRAPH.node, transposedGemm(model, f.valueStart, f.valueEnd, node));
  else if (named !== undefined && transposed.has(named)) {
    // The weight's declared shape becomes [1,K]; other annotations of it would contradict that.
    if (f.field === GRAPH.input) graph.message(GRAPH.input, (v) => writeValueInfo(v, { name: named, shape: [1, transposed.get(named) as number] }));
  } else graph.raw(model.subarray(f.start, f.end));
}

/** The node's fields with transB=1 in place of any transB it had. */
function transposedGemm(bytes: Uint8Array, from: number, to: number, node: NodeInfo): Uint8Array {
  const w = new ProtoWriter();
  for (const f of protoFields(bytes, from, to)) {
    if (f.start === node.transBStart) continue;
    w.raw(bytes.subarray(f.start, f.end));
  }
  w.message(NODE.attribute, (a) => a.string(ATTRIBUTE.name, 'transB').int(ATTRIBUTE.i, 1).int(ATTRIBUTE.type, ATTRIBUTE_INT));
  return w.finish();
}
