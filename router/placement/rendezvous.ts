/**
 * Rendezvous (highest random weight) hashing: every router ranks the replicas for a model the
 * same way from names alone, so independent instances pick the same replica for a cold model
 * without talking to each other, and removing a replica only moves the models it ranked first.
 */

/** FNV-1a over UTF-16 code units, then murmur3's finaliser so nearby names spread over 32 bits. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The weight of `replica` for `key`; ties (1 in 2^32) break by name so the order stays total. */
export function rendezvousWeight(replica: string, key: string): number {
  return hash32(`${replica}\u0000${key}`);
}

/** Items ordered from most to least preferred for `key`. */
export function rendezvousRank<T extends { name: string }>(items: readonly T[], key: string): T[] {
  return items
    .map((item) => ({ item, w: rendezvousWeight(item.name, key) }))
    .sort((a, b) => b.w - a.w || (a.item.name < b.item.name ? -1 : a.item.name > b.item.name ? 1 : 0))
    .map((x) => x.item);
}
