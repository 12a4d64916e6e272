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
