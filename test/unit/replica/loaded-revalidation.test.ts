import { ModelmuxError } from '../../../common/errors.js';
import { createLogger } from '../../../common/log.js';
import type { LoadedVersion } from '../../../replica/cache/model-cache.js';
import { LoadedRevalidator, type RevalidationResult } from '../../../replica/cache/loaded-revalidation.js';
import { eventually } from '../../../harness/eventually.js';

/** A cache of loaded versions, the store's answers, and what the loop did with them. */
function harness(store: Record<string, string | Error>) {
  let now = 0;
  const loaded = new Map<string, LoadedVersion>();
  const swaps: string[] = [];
  const results: [string, RevalidationResult][] = [];
  const lines: string[] = [];
  let asking = '';
  const r = new LoadedRevalidator({
    cache: {
      versions: () => [...loaded.values()],
      checked: (id, version, at) => {
        const v = loaded.get(id);
        if (v?.version === version) v.checkedAt = at;
      },
      swap: (id) => {
        swaps.push(id);
        return Promise.resolve(true);
      },
    },
    version: (id) => {
      asking = id;
      const v = store[id];
      return v instanceof Error ? Promise.reject(v) : Promise.resolve(v ?? '');
    },
    // An interval of 1000 on a clock that jumps past it at every read: each model is due again at once.
    pace: { intervalMs: 1000, perSecond: 1000 },
    clock: { now: () => (now += 2000) },
    log: createLogger({}, (line) => lines.push(line)),
    onResult: (result) => results.push([asking, result]),
  });
  return { r, loaded, swaps, results, lines };
}

describe('the revalidation loop of loaded models', () => {
  it('swaps a model whose version changed, and only that one', async () => {
    const h = harness({ same: 'e1', changed: 'e2', untagged: '' });
    for (const id of ['same', 'changed', 'untagged']) h.loaded.set(id, { id, version: 'e1', checkedAt: 0 });
    h.r.start();
    await eventually(() => expect(h.results.length).toBeGreaterThanOrEqual(3), 5000, 5);
    h.r.stop();
    const firstRound = new Map(h.results.slice(0, 3));
    expect(firstRound).toEqual(
      new Map([
        ['same', 'unchanged'],
        ['changed', 'changed'],
        ['untagged', 'unchanged'],
      ]),
    );
    expect(new Set(h.swaps)).toEqual(new Set(['changed']));
  });

  it('keeps a model the store lost or cannot be asked about, and says which', async () => {
    const h = harness({ gone: new ModelmuxError('model_not_found', 'no model'), down: new ModelmuxError('store_unavailable', 'refused') });
    for (const id of ['gone', 'down']) h.loaded.set(id, { id, version: 'e1', checkedAt: 0 });
    h.r.start();
    await eventually(() => expect(h.results.length).toBeGreaterThanOrEqual(2), 5000, 5);
    h.r.stop();
    expect(new Map(h.results.slice(0, 2))).toEqual(
      new Map([
        ['gone', 'not_found'],
        ['down', 'failed'],
      ]),
    );
    expect(h.swaps).toEqual([]);
    expect(h.lines.some((l) => l.includes('"level":"warn"') && l.includes('revalidate-gone'))).toBe(true);
  });

  it('asks nothing once stopped', async () => {
    const h = harness({ m: 'e1' });
    h.loaded.set('m', { id: 'm', version: 'e1', checkedAt: 0 });
    h.r.start();
    h.r.stop();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(h.results).toEqual([]);
  });
});
