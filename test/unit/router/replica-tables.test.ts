import { silentLogger } from '../../../common/log.js';
import type { ModelId } from '../../../common/model-id.js';
import type { ModelTable } from '../../../common/model-table.js';
import { encodeTableAnnotation } from '../../../common/table-annotation.js';
import { ReplicaTables } from '../../../router/discovery/replica-tables.js';
import { FakeTime } from './fake-time.js';

/** Ids long enough that a few hundred make the annotation compact. */
const ids = (prefix: string, n: number): ModelId[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}-${'x'.repeat(40)}` as ModelId);

const table = (version: number, loaded: ModelId[], loading: ModelId[] = []): ModelTable => ({ version, loaded, loading, capacity: 1000 });

/** A fetch the test answers by hand, one call at a time. */
class Fetches {
  readonly calls: { url: string; resolve: (t: ModelTable | undefined) => void; reject: (e: Error) => void }[] = [];
  readonly fetch = (url: string): Promise<ModelTable | undefined> =>
    new Promise((resolve, reject) => {
      this.calls.push({ url, resolve, reject });
    });
  take(): { url: string; resolve: (t: ModelTable | undefined) => void; reject: (e: Error) => void } {
    const c = this.calls.shift();
    if (!c) throw new Error('no fetch was made');
    return c;
  }
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

function setup(concurrency = 4) {
  const time = new FakeTime();
  const fetches = new Fetches();
  let changes = 0;
  const tables = new ReplicaTables({ fetch: fetches.fetch, concurrency, retryMs: 1000, maxRetryMs: 8000, clock: time, setTimer: time.setTimer, onChange: () => void changes++, log: silentLogger });
  return { time, fetches, tables, changes: () => changes };
}

describe('replica tables', () => {
  it('takes a full annotation as the table, fetching nothing', () => {
    const { tables, fetches } = setup();
    const t = table(3, ['a' as ModelId], ['b' as ModelId]);
    expect(tables.tableOf('ns/a', 'http://10.0.0.1:8080', encodeTableAnnotation(t))).toEqual(t);
    expect(fetches.calls).toHaveLength(0);
  });

  it('fetches the exact table once per compact annotation and places by it', async () => {
    const { tables, fetches, changes } = setup();
    const t = table(10, ids('m', 500));
    const raw = encodeTableAnnotation(t);
    expect(raw.length).toBeLessThan(JSON.stringify(t).length / 5);
    expect(tables.tableOf('ns/a', 'http://10.0.0.1:8080', raw)).toBeUndefined();
    expect(tables.tableOf('ns/a', 'http://10.0.0.1:8080', raw)).toBeUndefined();
    expect(fetches.calls.map((c) => c.url)).toEqual(['http://10.0.0.1:8080']);
    fetches.take().resolve(t);
    await settle();
    expect(changes()).toBe(1);
    const placed = tables.tableOf('ns/a', 'http://10.0.0.1:8080', raw);
    expect(placed?.loaded).toEqual(t.loaded);
    // The same annotation again: no fetch, and the same object (the balancer rebuilds nothing).
    expect(tables.tableOf('ns/a', 'http://10.0.0.1:8080', raw)).toBe(placed);
    expect(fetches.calls).toHaveLength(0);
  });

  it('takes a newer annotation of the same sets without a fetch', async () => {
    const { tables, fetches } = setup();
    const loaded = ids('m', 500);
    tables.tableOf('ns/a', 'u', encodeTableAnnotation(table(10, loaded)));
    fetches.take().resolve(table(10, loaded));
    await settle();
    // A load that started and failed: two versions later, the same models.
    const later = tables.tableOf('ns/a', 'u', encodeTableAnnotation({ ...table(12, loaded), bytes: 99 }));
    expect(later).toMatchObject({ version: 12, bytes: 99 });
    expect(later?.loaded).toEqual(loaded);
    expect(fetches.calls).toHaveLength(0);
  });

  it('keeps the last table while a changed one is fetched, and does not fetch again for the same annotation', async () => {
    const { tables, fetches } = setup();
    const first = table(10, ids('m', 500));
    tables.tableOf('ns/a', 'u', encodeTableAnnotation(first));
    fetches.take().resolve(first);
    await settle();
    const changed = table(11, [...ids('n', 1), ...ids('m', 499)]);
    const raw = encodeTableAnnotation(changed);
    expect(tables.tableOf('ns/a', 'u', raw)?.version).toBe(10);
    // The replica moved on again before the fetch: the answer is newer than the annotation.
    fetches.take().resolve(table(13, [...ids('n', 2), ...ids('m', 498)]));
    await settle();
    expect(tables.tableOf('ns/a', 'u', raw)?.version).toBe(13);
    expect(fetches.calls).toHaveLength(0);
  });

  it('fetches at most `concurrency` tables at once', async () => {
    const { tables, fetches } = setup(2);
    const raws = Array.from({ length: 5 }, (_, i) => encodeTableAnnotation(table(1, ids(`r${i}`, 300))));
    raws.forEach((raw, i) => tables.tableOf(`ns/r${i}`, `u${i}`, raw));
    expect(fetches.calls.map((c) => c.url)).toEqual(['u0', 'u1']);
    fetches.take().resolve(table(1, ids('r0', 300)));
    await settle();
    expect(fetches.calls.map((c) => c.url)).toEqual(['u1', 'u2']);
  });

  it('after a failed fetch, drops what the filter rules out, retries with backoff and recovers', async () => {
    const { tables, fetches, time, changes } = setup();
    const old = ids('m', 500);
    tables.tableOf('ns/a', 'u', encodeTableAnnotation(table(10, old)));
    fetches.take().resolve(table(10, old));
    await settle();
    // 100 evicted, 100 loaded: the filter holds the new set.
    const now = [...ids('new', 100), ...old.slice(0, 400)];
    const raw = encodeTableAnnotation(table(20, now));
    tables.tableOf('ns/a', 'u', raw);
    fetches.take().reject(new Error('connection refused'));
    await settle();
    const pruned = tables.tableOf('ns/a', 'u', raw);
    // Its own version: the models loaded since are not in it.
    expect(pruned?.version).toBe(10);
    expect(pruned?.loaded).toEqual(old.slice(0, 400));
    // No retry before the backoff has passed; then the routes are read again and it is.
    expect(fetches.calls).toHaveLength(0);
    const before = changes();
    time.advance(999);
    expect(changes()).toBe(before);
    tables.tableOf('ns/a', 'u', raw);
    expect(fetches.calls).toHaveLength(0);
    time.advance(1);
    expect(changes()).toBe(before + 1);
    tables.tableOf('ns/a', 'u', raw);
    fetches.take().resolve(table(20, now));
    await settle();
    expect(tables.tableOf('ns/a', 'u', raw)).toMatchObject({ version: 20, loaded: now });
  });

  it('says when no fetch is left, so a starting router can wait for its first tables', async () => {
    const { tables, fetches } = setup(1);
    await tables.settled();
    const a = table(1, ids('a', 300));
    const b = table(1, ids('b', 300));
    tables.tableOf('ns/a', 'ua', encodeTableAnnotation(a));
    tables.tableOf('ns/b', 'ub', encodeTableAnnotation(b));
    let settled = false;
    void tables.settled().then(() => (settled = true));
    fetches.take().resolve(a);
    await settle();
    expect(settled).toBe(false);
    fetches.take().reject(new Error('timeout'));
    await settle();
    expect(settled).toBe(true);
  });

  it('forgets replicas no longer asked about, and a fetch that ends after that', async () => {
    const { tables, fetches, changes } = setup();
    const t = table(1, ids('m', 300));
    tables.tableOf('ns/a', 'u', encodeTableAnnotation(t));
    tables.sweep();
    tables.sweep();
    fetches.take().resolve(t);
    await settle();
    expect(changes()).toBe(0);
    // Asked again, it starts from nothing.
    expect(tables.tableOf('ns/a', 'u', encodeTableAnnotation(t))).toBeUndefined();
    expect(fetches.calls).toHaveLength(1);
  });
});
