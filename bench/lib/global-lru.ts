/**
 * The floor for model loads: one ideal LRU cache over all slots of the pool (replicas × models
 * per replica), as if the whole pool were one replica that never loads a model twice. Uniform
 * traffic over more models than slots forces loads on any system; this counts how many.
 */
export function globalLruMisses(sequence: Iterable<string>, slots: number, warmup = 0): { requests: number; misses: number } {
  const cache = new Set<string>(); // insertion order = recency order; re-inserting refreshes
  let i = 0;
  let requests = 0;
  let misses = 0;
  for (const id of sequence) {
    const counted = i++ >= warmup;
    if (cache.has(id)) {
      cache.delete(id);
    } else {
      if (counted) misses++;
      if (cache.size >= slots) {
        const oldest = cache.values().next();
        if (!oldest.done) cache.delete(oldest.value);
      }
    }
    cache.add(id);
    if (counted) requests++;
  }
  return { requests, misses };
}
