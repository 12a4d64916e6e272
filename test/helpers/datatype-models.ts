import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { encodeOnnxModel, ONNX_ELEM_TYPE, type OnnxElemType, type OnnxNode } from '../../common/onnx-writer.js';

/**
 * Operator-level models of every element type, written by common/onnx-writer.ts: the test
 * corpus for the V2 datatypes. Each takes `x` of [batch, 3] and answers `y`.
 */

/** One node from `x` [batch,3] of type `from` to `y` of type `to`. */
function unaryModel(node: OnnxNode, from: OnnxElemType, to: OnnxElemType): Uint8Array {
  return encodeOnnxModel({
    name: `${node.opType.toLowerCase()}_${from}_${to}`,
    nodes: [node],
    initializers: [],
    inputs: [{ name: 'x', shape: ['batch', 3], elemType: from }],
    outputs: [{ name: 'y', shape: ['batch', 3], elemType: to }],
    opset: 17,
  });
}

/** `y = Identity(x)`, of one element type. */
export function identityModel(type: OnnxElemType): Uint8Array {
  return unaryModel({ opType: 'Identity', inputs: ['x'], outputs: ['y'] }, type, type);
}

/** `y = Cast(x)` from one element type to another. */
export function castModel(from: OnnxElemType, to: OnnxElemType): Uint8Array {
  return unaryModel({ opType: 'Cast', inputs: ['x'], outputs: ['y'], intAttributes: { to: ONNX_ELEM_TYPE[to] } }, from, to);
}

/** No node at all: the input `x` is also the output, as a model that passes a tensor through does. */
export function passThroughModel(type: OnnxElemType): Uint8Array {
  return encodeOnnxModel({
    name: `pass_through_${type}`,
    nodes: [],
    initializers: [],
    inputs: [{ name: 'x', shape: ['batch', 3], elemType: type }],
    outputs: [{ name: 'x', shape: ['batch', 3], elemType: type }],
    opset: 17,
  });
}

/** Two inputs of two element types, `a` and `b` [batch,3], each answered as it came: `ya` and `yb`. */
export function pairModel(a: OnnxElemType, b: OnnxElemType): Uint8Array {
  return encodeOnnxModel({
    name: `pair_${a}_${b}`,
    nodes: [
      { opType: 'Identity', inputs: ['a'], outputs: ['ya'] },
      { opType: 'Identity', inputs: ['b'], outputs: ['yb'] },
    ],
    initializers: [],
    inputs: [
      { name: 'a', shape: ['batch', 3], elemType: a },
      { name: 'b', shape: ['batch', 3], elemType: b },
    ],
    outputs: [
      { name: 'ya', shape: ['batch', 3], elemType: a },
      { name: 'yb', shape: ['batch', 3], elemType: b },
    ],
    opset: 17,
  });
}

/**
 * Two outputs of `x` (float): `y` its copy and `label` a string tensor, as a scikit-learn
 * classifier with string labels has. `label` is Cast(x → string).
 */
export function stringOutputModel(): Uint8Array {
  return encodeOnnxModel({
    name: 'string_output',
    nodes: [
      { opType: 'Identity', inputs: ['x'], outputs: ['y'] },
      { opType: 'Cast', inputs: ['x'], outputs: ['label'], intAttributes: { to: ONNX_ELEM_TYPE.string } },
    ],
    initializers: [],
    inputs: [{ name: 'x', shape: ['batch', 3], elemType: 'float32' }],
    outputs: [
      { name: 'y', shape: ['batch', 3], elemType: 'float32' },
      { name: 'label', shape: ['batch', 3], elemType: 'string' },
    ],
    opset: 17,
  });
}

/** `y = Identity(x)` beside `seq`, a sequence (not a tensor, so not served), as ZipMap outputs are not. */
export function sequenceOutputModel(): Uint8Array {
  return encodeOnnxModel({
    name: 'sequence_output',
    nodes: [
      { opType: 'Identity', inputs: ['x'], outputs: ['y'] },
      { opType: 'SequenceConstruct', inputs: ['x'], outputs: ['seq'] },
    ],
    initializers: [],
    inputs: [{ name: 'x', shape: ['batch', 3] }],
    outputs: [
      { name: 'y', shape: ['batch', 3] },
      { name: 'seq', shape: ['batch', 3], sequence: true },
    ],
    opset: 17,
  });
}

/** Writes `bytes` as `<root>/<id>/model.onnx`; returns the model's folder. */
export function writeModel(root: string, id: string, bytes: Uint8Array): string {
  const dir = join(root, id);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'model.onnx'), bytes);
  return dir;
}

/**
 * `y = x·W + B` (x [batch,3], W [3,2], B [2]) with W in the external data file `location` beside
 * the model, written under `<root>/<id>/`. B stays inline, so the model has weights of both kinds.
 */
export function writeExternalDataModel(root: string, id: string, w: Float32Array, b: Float32Array, location = 'model.onnx.data'): string {
  const model = encodeOnnxModel({
    name: 'external_data',
    nodes: [
      { opType: 'MatMul', inputs: ['x', 'W'], outputs: ['xw'] },
      { opType: 'Add', inputs: ['xw', 'B'], outputs: ['y'] },
    ],
    initializers: [
      { name: 'W', dims: [3, 2], data: w, external: { location, offset: 0 } },
      { name: 'B', dims: [2], data: b },
    ],
    inputs: [{ name: 'x', shape: ['batch', 3] }],
    outputs: [{ name: 'y', shape: ['batch', 2] }],
    opset: 17,
  });
  const dir = writeModel(root, id, model);
  const target = join(dir, location);
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, new Uint8Array(w.buffer, w.byteOffset, w.byteLength));
  return dir;
}

/**
 * `y = x − mean(x)` over the whole batch: rows that interact, as a model computing over its
 * batch does. Stacking two requests would change both answers.
 */
export function batchMeanModel(): Uint8Array {
  return encodeOnnxModel({
    name: 'batch_mean',
    nodes: [
      { opType: 'ReduceMean', inputs: ['x'], outputs: ['mean'] },
      { opType: 'Sub', inputs: ['x', 'mean'], outputs: ['y'] },
    ],
    initializers: [],
    inputs: [{ name: 'x', shape: ['batch', 3] }],
    outputs: [{ name: 'y', shape: ['batch', 3] }],
    opset: 17,
  });
}
