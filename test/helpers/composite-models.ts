import { encodeOnnxModel } from '../../common/onnx-writer.js';

/**
 * Small models for ensembles and sequences, written by common/onnx-writer.ts. Each takes one
 * float input of [batch, 3] and answers `y` = input·W + B ([batch, 2]) and `label` =
 * ArgMax(y) ([batch], INT64): `y` is for mean and median, `label` for a vote. The input's name
 * is a parameter so a sequence's second step can take the first step's output by another name.
 */

/** y = x·W + B and label = argmax(y); `w` is [3, 2] row-major, `b` [2]. */
export function linearModel(w: readonly number[], b: readonly number[], input = 'x'): Uint8Array {
  return encodeOnnxModel({
    name: 'linear',
    nodes: [
      { opType: 'MatMul', inputs: [input, 'W'], outputs: ['xw'] },
      { opType: 'Add', inputs: ['xw', 'B'], outputs: ['y'] },
      { opType: 'ArgMax', inputs: ['y'], outputs: ['label'], intAttributes: { axis: 1, keepdims: 0 } },
    ],
    initializers: [
      { name: 'W', dims: [3, 2], data: Float32Array.from(w) },
      { name: 'B', dims: [2], data: Float32Array.from(b) },
    ],
    inputs: [{ name: input, shape: ['batch', 3] }],
    outputs: [
      { name: 'y', shape: ['batch', 2] },
      { name: 'label', shape: ['batch'], elemType: 'int64' },
    ],
    opset: 17,
  });
}

/** A first step: `ids` = 2·x ([batch, 3]), to be fed to a linear model whose input has another name. */
export function doublingModel(): Uint8Array {
  return encodeOnnxModel({
    name: 'doubling',
    nodes: [{ opType: 'Mul', inputs: ['x', 'two'], outputs: ['ids'] }],
    initializers: [{ name: 'two', dims: [1], data: Float32Array.of(2) }],
    inputs: [{ name: 'x', shape: ['batch', 3] }],
    outputs: [{ name: 'ids', shape: ['batch', 3] }],
    opset: 17,
  });
}

/** y = x·W + B for rows of x, as the models compute it (in doubles, close to their float32). */
export function linear(rows: readonly number[][], w: readonly number[], b: readonly number[]): number[][] {
  return rows.map((x) => [0, 1].map((c) => (b[c] as number) + x.reduce((s, v, r) => s + v * (w[r * 2 + c] as number), 0)));
}

/** Weights (`w`, [3, 2] row-major) and biases (`b`, [2]) of the linear members the composite suites share. */
export const MEMBER_W = {
  a: [1, 0, 0, 1, 1, 1],
  b: [0.5, -1, 2, 0, -1, 3],
  c: [-2, 1, 0.25, 0.5, 1, -1],
  classify: [1, -1, 0.5, 2, -0.25, 1],
};
export const MEMBER_B = { a: [0, 1], b: [1, -1], c: [0.5, 0.5], classify: [0.25, -0.5] };

/** A ModelRoute of an ensemble of `members` in the MultiplexedDeployment `comp`, as a routes file holds it. */
export function ensembleRoute(name: string, members: string[], combine: string, extra: Record<string, unknown> = {}): unknown {
  return {
    apiVersion: 'modelmux.io/v1alpha1',
    kind: 'ModelRoute',
    metadata: { name },
    spec: { deploymentRef: { name: 'comp' }, ensemble: { members: members.map((model) => ({ model })), combine, ...extra } },
  };
}

/** A ModelRoute of a sequence of `steps` in the MultiplexedDeployment `comp`. */
export function sequenceRoute(name: string, steps: unknown[]): unknown {
  return { apiVersion: 'modelmux.io/v1alpha1', kind: 'ModelRoute', metadata: { name }, spec: { deploymentRef: { name: 'comp' }, sequence: { steps } } };
}
