import { ModelmuxError } from '../../../common/errors.js';
import { combineOutputs, type MemberOutputs, type V2Tensor } from '../../../router/composite/tensor-combine.js';

function t(name: string, datatype: string, shape: number[], data: unknown[]): V2Tensor {
  return { name, datatype, shape, data };
}

function members(...outputs: V2Tensor[][]): MemberOutputs[] {
  return outputs.map((o, i) => ({ member: `m${i}`, outputs: o }));
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof ModelmuxError ? `${err.code}: ${err.message}` : String(err);
  }
  return undefined;
}

describe('combineOutputs', () => {
  const a = [t('y', 'FP32', [2, 2], [1, 2, 3, 4]), t('label', 'INT64', [2], [0, 1])];
  const b = [t('y', 'FP32', [2, 2], [3, 2, 5, -4]), t('label', 'INT64', [2], [1, 1])];
  const c = [t('y', 'FP32', [2, 2], [8, 2, 4, 0]), t('label', 'INT64', [2], [2, 0])];

  it('takes the element-wise mean; integers answer FP64', () => {
    const out = combineOutputs(members(a, b, c), 'mean', undefined);
    expect(out).toEqual([t('y', 'FP32', [2, 2], [4, 2, 4, 0]), t('label', 'FP64', [2], [1, 2 / 3])]);
  });

  it('takes the element-wise median, the mean of the two middle values for an even count', () => {
    expect(combineOutputs(members(a, b, c), 'median', ['y'])).toEqual([t('y', 'FP32', [2, 2], [3, 2, 4, 0])]);
    expect(combineOutputs(members(a, b), 'median', ['y'])).toEqual([t('y', 'FP32', [2, 2], [2, 2, 4, 0])]);
  });

  it('votes per element; a tie goes to the value of the member listed first', () => {
    expect(combineOutputs(members(a, b, c), 'vote', ['label'])).toEqual([t('label', 'INT64', [2], [0, 1])]);
    // label[0] is 0, 1, 2: all tied, m0's value wins; reorder and the first member's wins.
    expect(combineOutputs(members(c, b, a), 'vote', ['label'])[0]?.data[0]).toBe(2);
    // A majority beats the member order.
    expect(combineOutputs(members(c, b, b), 'vote', ['label'])[0]?.data).toEqual([1, 1]);
  });

  it('votes over any datatype, strings and booleans too, by value and type', () => {
    const s = (v: unknown[]): V2Tensor[] => [t('k', 'BYTES', [2], v)];
    expect(combineOutputs(members(s(['cat', 'dog']), s(['dog', 'dog']), s(['dog', 'cat'])), 'vote', undefined)[0]?.data).toEqual(['dog', 'dog']);
    expect(combineOutputs(members([t('b', 'BOOL', [1], [true])], [t('b', 'BOOL', [1], [false])], [t('b', 'BOOL', [1], [false])]), 'vote', undefined)[0]?.data).toEqual([false]);
  });

  it('keeps non-finite floats as the strings the replica writes', () => {
    const x = (v: unknown): V2Tensor[] => [t('y', 'FP32', [1], [v])];
    expect(combineOutputs(members(x('inf'), x(1)), 'mean', undefined)[0]?.data).toEqual(['inf']);
    expect(combineOutputs(members(x('nan'), x(1), x(2)), 'median', undefined)[0]?.data).toEqual(['nan']);
    expect(combineOutputs(members(x('-inf'), x(1), x(2)), 'median', undefined)[0]?.data).toEqual([1]);
  });

  it('reads bigints (INT64 past 2^53) as numbers for the mean and by value for a vote', () => {
    const big = (v: unknown): V2Tensor[] => [t('i', 'INT64', [1], [v])];
    expect(combineOutputs(members(big(2n ** 60n), big(2n ** 60n), big(1)), 'vote', undefined)[0]?.data).toEqual([2n ** 60n]);
    expect(combineOutputs(members(big(2n), big(4)), 'mean', undefined)[0]?.data).toEqual([3]);
  });

  it('answers first the first member as it is, only the named outputs', () => {
    expect(combineOutputs(members(b, a), 'first', undefined)).toEqual(b);
    expect(combineOutputs(members(b, a), 'first', ['label'])).toEqual([b[1]]);
  });

  it('refuses outputs that cannot be combined, naming output and members', () => {
    expect(codeOf(() => combineOutputs(members(a, [t('y', 'FP32', [2, 2], [1, 2, 3, 4])]), 'mean', undefined))).toBe('ensemble_mismatch: member m1 answered no output "label" (it answered y)');
    expect(codeOf(() => combineOutputs(members(a, [t('y', 'FP64', [2, 2], [1, 2, 3, 4])]), 'mean', ['y']))).toBe('ensemble_mismatch: output "y" is FP64 from member m1 but FP32 from member m0');
    expect(codeOf(() => combineOutputs(members(a, [t('y', 'FP32', [4], [1, 2, 3, 4])]), 'vote', ['y']))).toBe('ensemble_mismatch: output "y" has shape [4] from member m1 but [2,2] from member m0');
    expect(codeOf(() => combineOutputs(members(a, [t('y', 'FP32', [2, 2], [1, 2, 3])]), 'vote', ['y']))).toBe('ensemble_mismatch: member m1 answered 3 values for output "y" of shape [2,2]');
    const s = [t('k', 'BYTES', [1], ['x'])];
    expect(codeOf(() => combineOutputs(members(s, s), 'median', undefined))).toMatch(/^ensemble_mismatch: output "k" is BYTES; median combines numbers only/);
    expect(codeOf(() => combineOutputs(members(a, b), 'first', ['nope']))).toMatch(/^ensemble_mismatch: member m0 answered no output "nope"/);
  });
});
