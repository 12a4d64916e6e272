/**
 * `make(key)` made once per key object and kept while the key lives: one metrics block per
 * registry, one mirror sender per proxy, without a module-level singleton a test would share.
 */
export function oncePer<K extends object, V>(make: (key: K) => V): (key: K) => V {
  const made = new WeakMap<K, V>();
  return (key) => {
    let v = made.get(key);
    if (v === undefined) {
      v = make(key);
      made.set(key, v);
    }
    return v;
  };
}
