import { compareVersions, joinModelId } from '../../common/model-version.js';
import type { IndexEntry } from '../../common/repository-index.js';

/**
 * The router's answer to `POST /v2/repository/index` of the model repository extension, pure:
 * the union of its route's replicas' indexes. A model (a name and version) is listed once, READY
 * when any replica holds it loaded (a request for it is then placed there), else LOADING.
 */

function order(a: IndexEntry, b: IndexEntry): number {
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  if (a.version === undefined || b.version === undefined) return (a.version === undefined ? 0 : 1) - (b.version === undefined ? 0 : 1);
  return compareVersions(a.version, b.version);
}

/** The union of `indexes`, sorted by name then version (the default version first); only READY models when `readyOnly`. */
export function mergeIndexes(indexes: readonly (readonly IndexEntry[])[], readyOnly: boolean): IndexEntry[] {
  const merged = new Map<string, IndexEntry>();
  for (const index of indexes) {
    for (const e of index) {
      // A version is digits and a name holds no "@": the pair's key is the model's own id.
      const key = joinModelId(e.name, e.version);
      const seen = merged.get(key);
      if (seen === undefined || (seen.state === 'LOADING' && e.state === 'READY')) merged.set(key, { name: e.name, ...(e.version !== undefined ? { version: e.version } : {}), state: e.state });
    }
  }
  return [...merged.values()].filter((e) => !readyOnly || e.state === 'READY').sort(order);
}
