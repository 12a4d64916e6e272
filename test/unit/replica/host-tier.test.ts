import type { ModelId } from '../../../common/model-id.js';
import { parseModelTable, TIER_LISTED_MAX, type ModelTable } from '../../../common/model-table.js';
import { encodeTableAnnotation, parseTableAnnotation } from '../../../common/table-annotation.js';
import { tierLists } from '../../../replica/cache/cache-report.js';
import { HostTier, hostTierUse, type HostEntry } from '../../../replica/cache/host-tier.js';

const entry = (size: number, version = 'v1', checkedAt = 0): HostEntry => ({ bytes: new Uint8Array(size), version, checkedAt, config: undefined });

describe('hostTierUse', () => {
  it('serves bytes the store confirmed within the window and asks it past the window', () => {
    expect(hostTierUse({ checkedAt: 1000 }, 1000 + 59_999, 60_000, false)).toBe('serve');
    expect(hostTierUse({ checkedAt: 1000 }, 1000 + 60_000, 60_000, false)).toBe('revalidate');
  });

  it('asks the store whenever a fresh copy is wanted, or with a window of 0', () => {
    expect(hostTierUse({ checkedAt: 1000 }, 1000, 60_000, true)).toBe('revalidate');
    expect(hostTierUse({ checkedAt: 1000 }, 1000, 0, false)).toBe('revalidate');
  });
});

describe('HostTier', () => {
  it('keeps demoted models up to its byte bound, evicting the least recently used', () => {
    const tier = new HostTier(30);
    tier.put('a', entry(10));
    tier.put('b', entry(10));
    tier.put('c', entry(10));
    expect(tier.get('a')?.version).toBe('v1');
    tier.put('d', entry(10));
    // b was used least recently (a was read again), so b goes.
    expect(tier.ids(10)).toEqual(['d', 'a', 'c']);
    expect(tier.bytes).toBe(30);
    expect(tier.size).toBe(3);
  });

  it('keeps nothing larger than itself, and nothing at all when its bound is 0', () => {
    const tier = new HostTier(30);
    tier.put('a', entry(10));
    expect(tier.put('big', entry(31))).toBe(false);
    expect(tier.ids(10)).toEqual(['a']);
    const off = new HostTier(0);
    expect(off.put('a', entry(1))).toBe(false);
    expect(off.size).toBe(0);
  });

  it('answers which version it holds, and confirms only that version', () => {
    const tier = new HostTier(100);
    tier.put('a', entry(10, 'v1', 5));
    expect(tier.versionOf('a')).toBe('v1');
    expect(tier.versionOf('b')).toBeUndefined();
    tier.confirm('a', 'v2', 50);
    expect(tier.get('a')?.checkedAt).toBe(5);
    tier.confirm('a', 'v1', 50);
    expect(tier.get('a')?.checkedAt).toBe(50);
  });

  it('lists at most the limit, leaving out the ids it is told to skip (the loaded ones)', () => {
    const tier = new HostTier(100);
    for (const id of ['a', 'b', 'c', 'd']) tier.put(id, entry(1));
    expect(tier.ids(2)).toEqual(['d', 'c']);
    expect(tier.ids(10, (id) => id === 'c')).toEqual(['d', 'b', 'a']);
  });

  it('grows its version with every change of the ids it holds', () => {
    const tier = new HostTier(20);
    const v0 = tier.version;
    tier.put('a', entry(10));
    tier.put('b', entry(10));
    const v1 = tier.version;
    expect(v1).toBeGreaterThan(v0);
    tier.put('c', entry(10)); // evicts a
    expect(tier.version).toBeGreaterThan(v1);
    const v2 = tier.version;
    tier.drop('b');
    expect(tier.version).toBeGreaterThan(v2);
  });
});

describe('the table’s tier lists', () => {
  it('lists the demoted models, not the loaded ones, and the disk’s, each at most TIER_LISTED_MAX', () => {
    const tier = new HostTier(1000);
    for (let i = 0; i < 40; i++) tier.put(`m${i}`, entry(1));
    const lists = tierLists(
      tier,
      (id) => id === 'm39',
      (limit) => Array.from({ length: 50 }, (_v, i) => `d${i}`).slice(0, limit),
    );
    expect(lists.host).toHaveLength(TIER_LISTED_MAX);
    expect(lists.host?.[0]).toBe('m38');
    expect(lists.disk).toHaveLength(TIER_LISTED_MAX);
  });

  it('leaves the lists out when the tiers are off, so the table reads as an older replica’s', () => {
    expect(tierLists(new HostTier(0), () => false, undefined)).toEqual({});
    expect(parseModelTable(JSON.stringify({ version: 1, loaded: ['a'], loading: [], capacity: 2 }))).toEqual({ version: 1, loaded: ['a'], loading: [], capacity: 2 });
  });

  it('travels in the full annotation form', () => {
    const ids = (...names: string[]): ModelId[] => names as ModelId[];
    const table: ModelTable = { version: 3, loaded: ids('a'), loading: [], capacity: 2, host: ids('b'), disk: ids('a', 'b') };
    expect(parseTableAnnotation(encodeTableAnnotation(table))).toEqual({ form: 'full', table });
  });
});
