import type { IndexEntry } from '../common/repository-index.js';

/**
 * The router's answer to `POST /v2/repository/index` of the model repository extension, pure:
 * the union of its route's replicas' indexes. A model is listed once, READY when any replica
 * holds it loaded (a request for it is then placed there), else LOADING.
 */

/** The union of `indexes`, sorted by name; only READY models when `readyOnly`. */
export function mergeIndexes(indexes: readonly (readonly IndexEntry[])[], readyOnly: boolean): IndexEntry[] {
  const merged = new Map<string, IndexEntry>();
  for (const index of indexes) {
    for (const e of index) {
      const seen = merged.get(e.name);
      if (seen === undefined || (seen.state === 'LOADING' && e.state === 'READY')) merged.set(e.name, { name: e.name, version: e.version, state: e.state });
    }
  }
  return [...merged.values()].filter((e) => !readyOnly || e.state === 'READY').sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
