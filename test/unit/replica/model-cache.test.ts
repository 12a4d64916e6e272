import { expect } from '@jest/globals';
import { ModelmuxError } from '../../../common/errors.js';
import type { CachePolicy } from '../../../common/resource.js';
import { ModelCache, type CacheEvent, type Loaded } from '../../../replica/cache/model-cache.js';

class Fake {
  released = 0;
  constructor(readonly id: string) {}
  release(): Promise<void> {
    this.released++;
    return Promise.resolve();
  }
}

interface Deferred {
  resolve(v: Loaded<Fake>): void;
  reject(e: unknown): void;
}

/** A loader whose loads finish when the test says so. */
function harness(opts: { maxModels: number; maxBytes?: number; maxConcurrentLoads?: number; policy?: CachePolicy }) {
  const pending = new Map<string, Deferred[]>();
  const calls: string[] = [];
  /** Ids of the loads that asked for a fresh copy (swaps). */
  const freshCalls: string[] = [];
  const events: CacheEvent[] = [];
  let t = 0;
  const cache = new ModelCache<Fake>({
    maxModels: opts.maxModels,
    ...(opts.maxBytes !== undefined ? { maxBytes: opts.maxBytes } : {}),
    maxConcurrentLoads: opts.maxConcurrentLoads ?? 4,
    ...(opts.policy !== undefined ? { policy: opts.policy } : {}),
    clock: { now: () => t },
    onEvent: (e) => events.push(e),
    load: (id, fresh) => {
      calls.push(id);
      if (fresh) freshCalls.push(id);
      return new Promise<Loaded<Fake>>((resolve, reject) => {
        pending.set(id, [...(pending.get(id) ?? []), { resolve, reject }]);
      });
    },
  });
  const flush = () => new Promise<void>((r) => setImmediate(r));
  const finish = async (id: string, bytes = 10, version?: string): Promise<Fake> => {
    await flush();
    const d = pending.get(id)?.shift();
    if (!d) throw new Error(`no pending load of ${id}`);
    const v = new Fake(id);
    t += 5;
    d.resolve({ value: v, bytes, ...(version !== undefined ? { version, checkedAt: t } : {}) });
    await flush();
    return v;
  };
  const fail = async (id: string, err: unknown): Promise<void> => {
    await flush();
    const d = pending.get(id)?.shift();
    if (!d) throw new Error(`no pending load of ${id}`);
    d.reject(err);
    await flush();
  };
  const use = async (id: string, bytes = 10) => {
    const p = cache.acquire(id);
    if (!cache.has(id) && cache.loadingIds.includes(id)) await finish(id, bytes);
    const lease = await p;
    lease.done();
    return lease;
  };
  return { cache, calls, freshCalls, events, finish, fail, flush, use };
}

describe('model cache', () => {
  it('evicts the least recently used model: load 1, 2, 3, use 1, load 4 evicts 2', async () => {
    const h = harness({ maxModels: 3 });
    for (const id of ['1', '2', '3']) await h.use(id);
    expect((await h.use('1')).hit).toBe(true);
    await h.use('4');
    // Most recently used first: the published table's last entry is the next victim.
    expect(h.cache.loadedIds).toEqual(['4', '1', '3']);
    expect(h.events.filter((e) => e.type === 'evict').map((e) => (e as { id: string }).id)).toEqual(['2']);
  });

  it('reports a change after an explicit eviction that no longer counts the model (the gauges read it)', async () => {
    const counted: number[] = [];
    const cache: ModelCache<Fake> = new ModelCache<Fake>({
      maxModels: 2,
      maxConcurrentLoads: 1,
      clock: { now: () => 0 },
      onEvent: (e) => e.type === 'change' && counted.push(cache.loadedCount),
      load: (id) => Promise.resolve({ value: new Fake(id), bytes: 10 }),
    });
    (await cache.acquire('1')).done();
    expect(counted.at(-1)).toBe(1);
    cache.evict('1');
    expect(counted.at(-1)).toBe(0);
    expect(cache.loadedBytes).toBe(0);
  });

  it('shares one load between every request for a loading model', async () => {
    const h = harness({ maxModels: 2 });
    const leases = Array.from({ length: 50 }, () => h.cache.acquire('m'));
    const model = await h.finish('m');
    const all = await Promise.all(leases);
    expect(h.calls).toEqual(['m']);
    expect(all.every((l) => l.value === model && !l.hit)).toBe(true);
  });

  it('runs loads of different models concurrently up to the bound', async () => {
    const h = harness({ maxModels: 5, maxConcurrentLoads: 2 });
    const a = h.cache.acquire('a');
    const b = h.cache.acquire('b');
    const c = h.cache.acquire('c');
    await h.flush();
    expect(h.calls).toEqual(['a', 'b']);
    expect(h.cache.loadingIds).toEqual(['a', 'b', 'c']);
    await h.finish('a');
    expect(h.calls).toEqual(['a', 'b', 'c']);
    await h.finish('b');
    await h.finish('c');
    await Promise.all([a, b, c]);
    expect(h.cache.loadedIds.sort()).toEqual(['a', 'b', 'c']);
  });

  it('releases an evicted model only after its last request is done', async () => {
    const h = harness({ maxModels: 1 });
    const p = h.cache.acquire('old');
    const old = await h.finish('old');
    const lease = await p;
    await h.use('new');
    expect(h.cache.loadedIds).toEqual(['new']);
    expect(h.cache.drainingIds).toEqual(['old']);
    expect(old.released).toBe(0);
    lease.done();
    lease.done();
    await h.flush();
    expect(old.released).toBe(1);
    expect(h.cache.drainingIds).toEqual([]);
  });

  it('takes an evicted model still in use back instead of loading it twice', async () => {
    const h = harness({ maxModels: 1 });
    const p = h.cache.acquire('x');
    const x = await h.finish('x');
    const held = await p;
    await h.use('y');
    const again = await h.cache.acquire('x');
    expect(again.value).toBe(x);
    expect(again.hit).toBe(true);
    expect(h.calls.filter((c) => c === 'x')).toHaveLength(1);
    expect(h.cache.loadedIds).toEqual(['x']);
    held.done();
    again.done();
    await h.flush();
    expect(x.released).toBe(0);
  });

  it('does not cache a failed load, evicts nothing for it, and tries again next time', async () => {
    const h = harness({ maxModels: 1 });
    await h.use('keep');
    const p = h.cache.acquire('bad').catch((e: unknown) => e);
    const q = h.cache.acquire('bad').catch((e: unknown) => e);
    await h.fail('bad', new ModelmuxError('model_load_failed', 'corrupt'));
    expect(await p).toMatchObject({ code: 'model_load_failed' });
    expect(await q).toMatchObject({ code: 'model_load_failed' });
    expect(h.cache.loadedIds).toEqual(['keep']);
    expect(h.cache.loadingIds).toEqual([]);
    const r = h.cache.acquire('bad');
    await h.finish('bad');
    await r;
    expect(h.calls).toEqual(['keep', 'bad', 'bad']);
  });

  it('bounds the loaded bytes and refuses a model larger than the bound', async () => {
    const h = harness({ maxModels: 10, maxBytes: 100 });
    await h.use('a', 60);
    await h.use('b', 30);
    await h.use('c', 30);
    expect(h.cache.loadedIds.sort()).toEqual(['b', 'c']);
    expect(h.cache.loadedBytes).toBe(60);
    const p = h.cache.acquire('huge').catch((e: unknown) => e);
    await h.finish('huge', 101);
    expect(await p).toMatchObject({ code: 'model_too_large' });
    expect(h.cache.loadedIds.sort()).toEqual(['b', 'c']);
  });

  it('keeps its counts and loaded bytes equal to the loaded set through evictions, re-entries and close', async () => {
    const h = harness({ maxModels: 3, maxBytes: 100, policy: 'frequency' });
    const bytes = new Map<string, number>();
    const check = (): void => {
      expect(h.cache.loadedCount).toBe(h.cache.loadedIds.length);
      expect(h.cache.loadingCount).toBe(h.cache.loadingIds.length);
      expect(h.cache.loadedBytes).toBe(h.cache.loadedIds.reduce((n, id) => n + (bytes.get(id) ?? NaN), 0));
    };
    // A fixed walk that evicts by count and by bytes, refuses entries and brings a draining model back.
    const walk: [string, number][] = [
      ['a', 10],
      ['b', 20],
      ['a', 10],
      ['c', 30],
      ['d', 50],
      ['a', 10],
      ['e', 60],
      ['e', 60],
      ['b', 20],
      ['f', 5],
    ];
    for (const [id, size] of walk) {
      bytes.set(id, size);
      await h.use(id, size);
      check();
    }
    const held = await h.cache.acquire('e');
    expect(held.hit).toBe(true);
    for (const id of ['g', 'h', 'g', 'h', 'g', 'h', 'g', 'h']) {
      bytes.set(id, 45);
      await h.use(id, 45);
      check();
    }
    // Evicted while held, then asked for again: it re-enters without a load.
    expect(h.cache.drainingIds).toEqual(['e']);
    const loadsOfE = h.calls.filter((c) => c === 'e').length;
    const again = await h.cache.acquire('e');
    expect(h.calls.filter((c) => c === 'e')).toHaveLength(loadsOfE);
    expect(h.cache.loadedIds).toContain('e');
    check();
    held.done();
    again.done();
    const closing = h.cache.close();
    check();
    await closing;
    expect(h.cache.loadedBytes).toBe(0);
    expect(h.cache.loadedCount).toBe(0);
  });

  it('grows its version with every change of the loaded and loading sets', async () => {
    const h = harness({ maxModels: 1 });
    const v0 = h.cache.version;
    const p = h.cache.acquire('a');
    expect(h.cache.version).toBeGreaterThan(v0);
    const v1 = h.cache.version;
    await h.finish('a');
    await p;
    expect(h.cache.version).toBeGreaterThan(v1);
  });

  it('reports load durations from the injected clock', async () => {
    const h = harness({ maxModels: 1 });
    await h.use('a');
    expect(h.events.find((e) => e.type === 'load-end')).toMatchObject({ id: 'a', ok: true, durationMs: 5, bytes: 10 });
  });

  it('releases every model on close and refuses new requests', async () => {
    const h = harness({ maxModels: 2 });
    const p = h.cache.acquire('a');
    const a = await h.finish('a');
    (await p).done();
    await h.cache.close();
    expect(a.released).toBe(1);
    await expect(h.cache.acquire('a')).rejects.toMatchObject({ code: 'shutting_down' });
  });
});

describe('model cache, new versions of loaded models', () => {
  /** `m` loaded at version v1, with one request holding it. */
  async function loadedAndHeld() {
    const h = harness({ maxModels: 2, maxBytes: 100 });
    const p = h.cache.acquire('m');
    const v1 = await h.finish('m', 10, 'v1');
    const held = await p;
    return { h, v1, held };
  }

  it('swaps in the new version while a request in flight finishes on the old one, released after it', async () => {
    const { h, v1, held } = await loadedAndHeld();
    const swapped = h.cache.swap('m');
    // Until the new version has loaded, requests get the old one.
    const during = await h.cache.acquire('m');
    expect(during.value).toBe(v1);
    during.done();
    const v2 = await h.finish('m', 30, 'v2');
    expect(await swapped).toBe(true);
    expect(h.freshCalls).toEqual(['m']);
    const after = await h.cache.acquire('m');
    expect({ value: after.value === v2, hit: after.hit }).toEqual({ value: true, hit: true });
    after.done();
    expect(held.value).toBe(v1);
    expect(v1.released).toBe(0);
    expect(h.cache.loadedIds).toEqual(['m']);
    expect(h.cache.loadedBytes).toBe(30);
    expect(h.cache.versions()).toEqual([{ id: 'm', version: 'v2', checkedAt: expect.any(Number) }]);
    expect(h.events.find((e) => e.type === 'swap')).toMatchObject({ id: 'm', ok: true, bytes: 30, inUse: 1 });
    held.done();
    await h.flush();
    expect({ v1: v1.released, v2: v2.released }).toEqual({ v1: 1, v2: 0 });
  });

  it('keeps the old version serving when the new one fails to load, and caches nothing of it', async () => {
    const { h, v1, held } = await loadedAndHeld();
    held.done();
    const swapped = h.cache.swap('m');
    await h.fail('m', new ModelmuxError('model_load_failed', 'truncated upload'));
    expect(await swapped).toBe(false);
    const lease = await h.cache.acquire('m');
    expect(lease.value).toBe(v1);
    lease.done();
    expect(v1.released).toBe(0);
    expect(h.events.find((e) => e.type === 'swap')).toMatchObject({ id: 'm', ok: false, error: { code: 'model_load_failed' } });
  });

  it('refuses a new version larger than the byte bound and keeps the old one', async () => {
    const { h, v1, held } = await loadedAndHeld();
    held.done();
    const swapped = h.cache.swap('m');
    const huge = await h.finish('m', 101, 'v2');
    expect(await swapped).toBe(false);
    await h.flush();
    expect(huge.released).toBe(1);
    expect((await h.cache.acquire('m')).value).toBe(v1);
  });

  it('never hands the old version back, even when the new one is evicted while the old one is still in use', async () => {
    const { h, v1, held } = await loadedAndHeld();
    const swapped = h.cache.swap('m');
    await h.finish('m', 10, 'v2');
    await swapped;
    await h.use('a');
    await h.use('b');
    expect(h.cache.loadedIds).not.toContain('m');
    const again = h.cache.acquire('m');
    const v3 = await h.finish('m', 10, 'v3');
    const lease = await again;
    expect({ isV3: lease.value === v3, isV1: lease.value === v1, hit: lease.hit }).toEqual({ isV3: true, isV1: false, hit: false });
    held.done();
  });

  it('swaps nothing for a model that is not loaded, or that was evicted while its new version loaded', async () => {
    const { h, held } = await loadedAndHeld();
    held.done();
    expect(await h.cache.swap('absent')).toBe(false);
    expect(h.calls).not.toContain('absent');
    const swapped = h.cache.swap('m');
    await h.use('a');
    await h.use('b');
    const late = await h.finish('m', 10, 'v2');
    expect(await swapped).toBe(false);
    await h.flush();
    expect(late.released).toBe(1);
    expect(h.cache.loadedIds).not.toContain('m');
  });

  it('runs one swap per model however many times it is asked for', async () => {
    const { h, held } = await loadedAndHeld();
    held.done();
    const both = [h.cache.swap('m'), h.cache.swap('m')];
    await h.finish('m', 10, 'v2');
    expect(await Promise.all(both)).toEqual([true, true]);
    expect(h.freshCalls).toEqual(['m']);
  });

  it('lists the versions of loaded models and when the store last confirmed each', async () => {
    const { h, held } = await loadedAndHeld();
    held.done();
    await h.use('unversioned');
    const [m] = h.cache.versions();
    expect(h.cache.versions()).toEqual([{ id: 'm', version: 'v1', checkedAt: m?.checkedAt }]);
    h.cache.checked('m', 'v1', 1000);
    h.cache.checked('m', 'v0', 2000);
    expect(h.cache.versions()).toEqual([{ id: 'm', version: 'v1', checkedAt: 1000 }]);
  });
});

describe('model cache, frequency policy', () => {
  const evictions = (events: CacheEvent[]) => events.flatMap((e) => (e.type === 'evict' ? [`${e.id}:${e.reason}`] : []));

  it('serves a rarely asked model without letting it push out a popular one, then releases it', async () => {
    const h = harness({ maxModels: 2, policy: 'frequency' });
    for (let i = 0; i < 3; i++) for (const id of ['a', 'b']) await h.use(id);
    const p = h.cache.acquire('rare');
    const rare = await h.finish('rare');
    const lease = await p;
    expect(lease.value).toBe(rare);
    expect(h.cache.loadedIds).toEqual(['b', 'a']);
    expect(h.cache.loadingIds).toEqual([]);
    expect(evictions(h.events)).toEqual(['rare:not_admitted']);
    expect(rare.released).toBe(0);
    lease.done();
    await h.flush();
    expect(rare.released).toBe(1);
    expect(h.cache.drainingIds).toEqual([]);
  });

  it('serves every request that waited for a load it does not keep, with one load', async () => {
    const h = harness({ maxModels: 1, policy: 'frequency' });
    for (let i = 0; i < 5; i++) await h.use('popular');
    const waiting = [h.cache.acquire('rare'), h.cache.acquire('rare')];
    const rare = await h.finish('rare');
    const leases = await Promise.all(waiting);
    expect(leases.map((l) => l.value)).toEqual([rare, rare]);
    expect(h.calls.filter((c) => c === 'rare')).toHaveLength(1);
    leases.forEach((l) => l.done());
    await h.flush();
    expect(rare.released).toBe(1);
    expect(h.cache.loadedIds).toEqual(['popular']);
  });

  it('behaves as LRU when the newcomer was asked for as often as the victim', async () => {
    const h = harness({ maxModels: 2, policy: 'frequency' });
    for (const id of ['a', 'b', 'c']) await h.use(id);
    expect(h.cache.loadedIds).toEqual(['c', 'b']);
    expect(evictions(h.events)).toEqual(['a:capacity']);
  });

  it('weighs a newcomer against every model the byte bound would evict, not only the model count', async () => {
    const h = harness({ maxModels: 10, maxBytes: 100, policy: 'frequency' });
    await h.use('c', 20);
    for (let i = 0; i < 3; i++) {
      await h.use('a', 40);
      await h.use('b', 40);
    }
    // Three of ten models, but 60 bytes more means evicting c and then a, asked for three times.
    await h.use('big', 60);
    await h.use('big', 60);
    expect(h.cache.loadedIds).toEqual(['b', 'a', 'c']);
    expect(evictions(h.events)).toEqual(['big:not_admitted', 'big:not_admitted']);
    // Asked for as often as both, it enters, and only the models it needs the room of go.
    await h.use('big', 60);
    expect(h.cache.loadedIds).toEqual(['big', 'b']);
    expect(evictions(h.events).slice(2)).toEqual(['c:capacity', 'a:capacity']);
  });

  it('lets a model in once it is asked for as often as the victim, without loading it again', async () => {
    const h = harness({ maxModels: 1, policy: 'frequency' });
    await h.use('a');
    await h.use('a');
    const p = h.cache.acquire('b');
    const b = await h.finish('b');
    const held = await p;
    expect(h.cache.loadedIds).toEqual(['a']);
    const again = await h.cache.acquire('b');
    expect(again.value).toBe(b);
    expect(h.cache.loadedIds).toEqual(['b']);
    expect(h.calls.filter((c) => c === 'b')).toHaveLength(1);
    held.done();
    again.done();
    await h.flush();
    expect(b.released).toBe(0);
    expect(evictions(h.events)).toEqual(['b:not_admitted', 'a:capacity']);
  });
});
