import { ModelmuxError } from '../../common/errors.js';
import type { EnsembleCombiner } from '../../common/model-route.js';

/**
 * Combining the answers of an ensemble's members, pure: V2 output tensors in, V2 output
 * tensors out. Values are those JSON gives a V2 answer: numbers, the strings "nan", "inf" and
 * "-inf" that float tensors write for non-finite values, booleans, strings (BYTES) and, past
 * 2^53, bigints (the router parses answers as the replica parses requests).
 */

/** One output of a V2 inference answer, its data flattened to row-major order. */
export interface V2Tensor {
  name: string;
  datatype: string;
  shape: number[];
  data: unknown[];
}

/** One member's outputs, in member order, for the error messages and the tie rule. */
export interface MemberOutputs {
  member: string;
  outputs: V2Tensor[];
}

const FLOATS: ReadonlySet<string> = new Set(['FP16', 'BF16', 'FP32', 'FP64']);
const INTEGERS: ReadonlySet<string> = new Set(['INT8', 'INT16', 'INT32', 'INT64', 'UINT8', 'UINT16', 'UINT32', 'UINT64']);

function mismatch(message: string): ModelmuxError {
  return new ModelmuxError('ensemble_mismatch', message);
}

/** A value as a number for mean and median; the non-finite strings of float tensors included. */
function numeric(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (v === 'nan') return Number.NaN;
  if (v === 'inf') return Number.POSITIVE_INFINITY;
  if (v === '-inf') return Number.NEGATIVE_INFINITY;
  return Number.NaN;
}

/** A number as a float tensor's JSON value, as the replica writes one. */
function floatValue(v: number): number | string {
  if (Number.isFinite(v)) return v;
  return Number.isNaN(v) ? 'nan' : v > 0 ? 'inf' : '-inf';
}

function elementCount(shape: readonly number[]): number {
  return shape.reduce((n, d) => n * d, 1);
}

/** The tensor `name` of every member, checked to agree in datatype and shape. */
function alike(members: readonly MemberOutputs[], name: string): V2Tensor[] {
  const first = members[0] as MemberOutputs;
  const tensors = members.map((m) => {
    const t = m.outputs.find((o) => o.name === name);
    if (t === undefined) throw mismatch(`member ${m.member} answered no output "${name}" (it answered ${m.outputs.map((o) => o.name).join(', ') || 'none'})`);
    if (t.data.length !== elementCount(t.shape)) throw mismatch(`member ${m.member} answered ${t.data.length} values for output "${name}" of shape [${t.shape.join(',')}]`);
    return t;
  });
  const ref = tensors[0] as V2Tensor;
  tensors.forEach((t, i) => {
    const who = (members[i] as MemberOutputs).member;
    if (t.datatype !== ref.datatype) throw mismatch(`output "${name}" is ${t.datatype} from member ${who} but ${ref.datatype} from member ${first.member}`);
    if (t.shape.length !== ref.shape.length || t.shape.some((d, k) => d !== ref.shape[k])) {
      throw mismatch(`output "${name}" has shape [${t.shape.join(',')}] from member ${who} but [${ref.shape.join(',')}] from member ${first.member}`);
    }
  });
  return tensors;
}

/** The datatype `combine` answers for members' outputs of `datatype`: the mean or median of integers is rarely one, so those answer FP64. */
export function combinedDatatype(combine: EnsembleCombiner, datatype: string): string {
  return (combine === 'mean' || combine === 'median') && INTEGERS.has(datatype) ? 'FP64' : datatype;
}

function numericDatatype(name: string, datatype: string, combine: EnsembleCombiner): string {
  if (!FLOATS.has(datatype) && !INTEGERS.has(datatype)) throw mismatch(`output "${name}" is ${datatype}; ${combine} combines numbers only (vote takes any datatype)`);
  return combinedDatatype(combine, datatype);
}

function mean(values: number[]): number {
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** The middle value, or the mean of the two middle ones; NaN when any value is NaN. */
function median(values: number[]): number {
  if (values.some(Number.isNaN)) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Two JSON values are one vote when they are the same value of the same type. */
function voteKey(v: unknown): string {
  return `${typeof v}:${String(v)}`;
}

/**
 * The most frequent value; a tie goes to the tied value given by the member listed first, so
 * the answer depends on the route's member order, never on which member answered first.
 */
function mode(values: readonly unknown[]): unknown {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(voteKey(v), (counts.get(voteKey(v)) ?? 0) + 1);
  let best = values[0];
  let bestCount = 0;
  for (const v of values) {
    const c = counts.get(voteKey(v)) as number;
    if (c > bestCount) {
      best = v;
      bestCount = c;
    }
  }
  return best;
}

/** Combines one output of every member, element by element. */
function combineOutput(members: readonly MemberOutputs[], name: string, combine: Exclude<EnsembleCombiner, 'first'>): V2Tensor {
  const tensors = alike(members, name);
  const ref = tensors[0] as V2Tensor;
  const n = ref.data.length;
  const data = new Array<unknown>(n);
  const column = new Array<unknown>(tensors.length);
  if (combine === 'vote') {
    for (let i = 0; i < n; i++) {
      for (let m = 0; m < tensors.length; m++) column[m] = (tensors[m] as V2Tensor).data[i];
      data[i] = mode(column);
    }
    return { name, datatype: ref.datatype, shape: [...ref.shape], data };
  }
  const datatype = numericDatatype(name, ref.datatype, combine);
  const reduce = combine === 'mean' ? mean : median;
  const numbers = new Array<number>(tensors.length);
  for (let i = 0; i < n; i++) {
    for (let m = 0; m < tensors.length; m++) numbers[m] = numeric((tensors[m] as V2Tensor).data[i]);
    data[i] = floatValue(reduce(numbers));
  }
  return { name, datatype, shape: [...ref.shape], data };
}

/**
 * The ensemble's outputs from the members that answered (at least one), in member order:
 * `outputs` names those combined (all of the first member's when undefined); no other output is
 * answered. `first` answers the first member's outputs as they are.
 */
export function combineOutputs(members: readonly MemberOutputs[], combine: EnsembleCombiner, outputs: readonly string[] | undefined): V2Tensor[] {
  const first = members[0];
  if (first === undefined) throw new Error('combineOutputs of no member');
  const names = outputs ?? first.outputs.map((o) => o.name);
  if (combine === 'first') return names.map((name) => alike([first], name)[0] as V2Tensor);
  return names.map((name) => combineOutput(members, name, combine));
}
