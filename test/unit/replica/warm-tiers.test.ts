import { ModelmuxError } from '../../../common/errors.js';
import type { ModelId } from '../../../common/model-id.js';
import type { LocalModelFile, ModelStore } from '../../../replica/store/model-store.js';
import { WarmTiers, type ModelSource } from '../../../replica/serving/warm-tiers.js';

/**
 * A store of private downloads (as the S3 store's) whose files are bytes in a map, a clock that
 * moves when told, and the tiers between them; the file of `id` at version `v` is `/f/id.v`.
 */
function harness(opts: { maxBytes?: number; windowMs?: number; private?: boolean } = {}) {
  let now = 0;
  const versions = new Map<string, string | Error>();
  const files = new Map<string, Uint8Array>();
  const fetches: { id: string; fresh: boolean }[] = [];
  const asked: string[] = [];
  const store: ModelStore = {
    uri: 's3://test',
    fetch: (id, fresh = false) => {
      fetches.push({ id, fresh });
      const v = versions.get(id);
      if (v === undefined || v instanceof Error) return Promise.reject(v ?? new ModelmuxError('model_not_found', id));
      const file: LocalModelFile = { path: `/f/${id}.${v}`, bytes: 10, private: opts.private ?? true, source: 'store', version: { tag: v, checkedAt: now } };
      return Promise.resolve(file);
    },
  };
  const tiers = new WarmTiers({
    maxBytes: opts.maxBytes ?? 100,
    store,
    version: (id: ModelId) => {
      asked.push(id);
      const v = versions.get(id);
      return v instanceof Error ? Promise.reject(v) : v === undefined ? Promise.reject(new ModelmuxError('model_not_found', id)) : Promise.resolve(v);
    },
    revalidateAfterMs: opts.windowMs ?? 1000,
    clock: { now: () => now },
    onChange: () => undefined,
    readFile: (path) => {
      const b = files.get(path);
      return b === undefined ? Promise.reject(Object.assign(new Error('gone'), { code: 'ENOENT' })) : Promise.resolve(b);
    },
  });
  /** A model at version `v` in the store, its file `size` bytes of `fill`. */
  const put = (id: string, v: string, fill = 1, size = 10): void => {
    versions.set(id, v);
    files.set(`/f/${id}.${v}`, new Uint8Array(size).fill(fill));
  };
  /** A load as the replica service does it: source, the file's bytes captured, then the session (always fine here). */
  const load = async (id: string, fresh = false): Promise<ModelSource> => {
    const s = await tiers.source(id as ModelId, fresh);
    tiers.loaded(id, s, s.tier === 'host' ? undefined : await tiers.capture(s.file));
    return s;
  };
  const evict = (id: string): void => tiers.evicted(id, 'capacity');
  return { tiers, put, load, evict, fetches, asked, versions, files, tick: (ms: number) => (now += ms) };
}

describe('WarmTiers', () => {
  it('demotes an evicted model into host memory and loads it from there without the store', async () => {
    const h = harness();
    h.put('a', 'v1', 7);
    expect((await h.load('a')).tier).toBe('store');
    h.evict('a');
    expect(h.tiers.tier.ids(10)).toEqual(['a']);
    const again = await h.load('a');
    expect(again).toMatchObject({ tier: 'host', version: 'v1' });
    expect(again.tier === 'host' && again.bytes[0]).toBe(7);
    expect(h.fetches).toHaveLength(1);
    expect(h.asked).toEqual([]);
  });

  it('asks the store past the revalidation window and serves the bytes when it names their version', async () => {
    const h = harness();
    h.put('a', 'v1');
    await h.load('a');
    h.evict('a');
    h.tick(1000);
    expect((await h.load('a')).tier).toBe('host');
    expect(h.asked).toEqual(['a']);
    // Confirmed just now: the next load within the window asks nothing.
    h.evict('a');
    expect((await h.load('a')).tier).toBe('host');
    expect(h.asked).toEqual(['a']);
  });

  it('never serves bytes of a version the store replaced: drops them and fetches fresh', async () => {
    const h = harness();
    h.put('a', 'v1', 1);
    await h.load('a');
    h.evict('a');
    h.put('a', 'v2', 2);
    h.tick(1000);
    const s = await h.load('a');
    expect(s.tier).toBe('store');
    expect(h.fetches.at(-1)).toEqual({ id: 'a', fresh: true });
    expect(s.tier !== 'host' && s.file.version?.tag).toBe('v2');
    // Evicted again: the new version is demoted in its place.
    h.evict('a');
    const back = await h.load('a');
    expect(back.tier === 'host' && back.bytes[0]).toBe(2);
  });

  it('asks the store whenever a fresh copy is wanted (a swap), even within the window', async () => {
    const h = harness();
    h.put('a', 'v1');
    await h.load('a');
    h.evict('a');
    expect((await h.load('a', true)).tier).toBe('host');
    expect(h.asked).toEqual(['a']);
  });

  it('drops a model the store no longer has, and falls to the store when it cannot be asked', async () => {
    const h = harness();
    h.put('a', 'v1');
    h.put('b', 'v1');
    await h.load('a');
    await h.load('b');
    h.evict('a');
    h.evict('b');
    h.tick(1000);
    h.versions.delete('a');
    await expect(h.load('a')).rejects.toMatchObject({ code: 'model_not_found' });
    expect(h.tiers.tier.ids(10)).toEqual(['b']);
    h.versions.set('b', new ModelmuxError('store_unavailable', 'down'));
    await expect(h.load('b')).rejects.toMatchObject({ code: 'store_unavailable' });
    expect(h.fetches.at(-1)).toEqual({ id: 'b', fresh: false });
  });

  it('keeps nothing of a file too large for the tier, or when the tier is off', async () => {
    const h = harness({ maxBytes: 5 });
    h.put('a', 'v1');
    await h.load('a');
    h.evict('a');
    expect(h.tiers.tier.size).toBe(0);
    expect((await h.load('a')).tier).toBe('store');

    const off = harness({ maxBytes: 0 });
    off.put('a', 'v1');
    await off.load('a');
    off.evict('a');
    expect(off.tiers.tier.size).toBe(0);
  });

  it('drops the bytes of the old version when a load brings a new one, and those onnxruntime refused', async () => {
    const h = harness();
    h.put('a', 'v1');
    await h.load('a');
    h.put('a', 'v2', 2);
    // A load that captured nothing (the new file outgrew the tier) still drops the old bytes.
    h.tiers.loaded('a', { tier: 'store', file: { path: '/f/a.v2', bytes: 10, version: { tag: 'v2', checkedAt: 0 } } }, undefined);
    expect(h.tiers.tier.size).toBe(0);
    await h.load('a');
    expect(h.tiers.tier.versionOf('a')).toBe('v2');
    h.tiers.forget('a');
    expect(h.tiers.tier.size).toBe(0);
  });

  it('stays bounded by bytes, evicting the least recently demoted', async () => {
    const h = harness({ maxBytes: 25 });
    for (const id of ['a', 'b', 'c']) {
      h.put(id, 'v1');
      await h.load(id);
      h.evict(id);
    }
    expect(h.tiers.tier.ids(10)).toEqual(['c', 'b']);
    expect(h.tiers.tier.bytes).toBe(20);
  });
});
