import { indexSchema, type IndexEntry } from '../../../common/repository-index.js';
import { mergeIndexes } from '../../../router/routes/repository-merge.js';

const e = (name: string, state: IndexEntry['state']): IndexEntry => ({ name, state });

describe('mergeIndexes', () => {
  it('lists each model once, READY when any replica has it ready', () => {
    const a = [e('m2', 'LOADING'), e('m1', 'READY')];
    const b = [e('m2', 'READY'), e('m3', 'LOADING')];
    const c = [e('m3', 'LOADING'), e('m1', 'LOADING')];
    expect(mergeIndexes([a, b, c], false)).toEqual([e('m1', 'READY'), e('m2', 'READY'), e('m3', 'LOADING')]);
    // The order of the replicas' answers does not matter.
    expect(mergeIndexes([c, b, a], false)).toEqual(mergeIndexes([a, b, c], false));
  });

  it('lists the versions of a model apart, the default version (no number) first, then by number', () => {
    const v = (version: string | undefined, state: IndexEntry['state']): IndexEntry => ({ name: 'w', ...(version !== undefined ? { version } : {}), state });
    const a = [v('10', 'READY'), v('2', 'LOADING'), v(undefined, 'LOADING')];
    const b = [v('2', 'READY'), v(undefined, 'READY'), e('a', 'READY')];
    expect(mergeIndexes([a, b], false)).toEqual([e('a', 'READY'), v(undefined, 'READY'), v('2', 'READY'), v('10', 'READY')]);
  });

  it('keeps only READY models when asked for ready ones', () => {
    expect(mergeIndexes([[e('x', 'LOADING'), e('y', 'READY')], [e('x', 'LOADING')]], true)).toEqual([e('y', 'READY')]);
  });

  it('is empty for no replicas or empty indexes', () => {
    expect(mergeIndexes([], false)).toEqual([]);
    expect(mergeIndexes([[], []], false)).toEqual([]);
  });
});

describe('indexSchema', () => {
  it('drops fields a replica adds and refuses a malformed answer', () => {
    expect(indexSchema.parse([{ name: 'm', version: '1', state: 'READY', reason: 'x' }])).toEqual([{ name: 'm', version: '1', state: 'READY' }]);
    expect(indexSchema.parse([{ name: 'm', state: 'READY' }])).toEqual([e('m', 'READY')]);
    expect(indexSchema.safeParse([{ name: 'm', version: '1', state: 'UNAVAILABLE' }]).success).toBe(false);
    expect(indexSchema.safeParse({ models: [] }).success).toBe(false);
  });
});
