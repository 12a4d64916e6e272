import { ModelmuxError } from '../../common/errors.js';
import type { ModelId } from '../../common/model-id.js';
import { TIER_LISTED_MAX, type ModelTable } from '../../common/model-table.js';
import type { HostTier } from './host-tier.js';
import type { ReplicaMetrics } from '../metrics.js';
import type { ModelCache, Releasable } from './model-cache.js';

/** What either backend (the built-in engine, a sidecar's runtime) reports of its model cache. */

/** The table the replica publishes and answers at `GET /models`. */
export function cacheTable<T extends Releasable>(cache: ModelCache<T>, maxModels: number, maxBytes: number | undefined): ModelTable {
  return {
    version: cache.version,
    loaded: cache.loadedIds as ModelId[],
    loading: cache.loadingIds as ModelId[],
    capacity: maxModels,
    bytes: cache.loadedBytes,
    ...(maxBytes !== undefined ? { maxBytes } : {}),
  };
}

/**
 * The table's warm-tier lists (ADR 0047): the models in host memory that are not loaded, and the
 * models with files on disk, each most recently used first and at most TIER_LISTED_MAX. A list
 * is left out when its tier is off, so tables of replicas without it read as before.
 */
export function tierLists(host: HostTier, loaded: (id: string) => boolean, diskIds: ((limit: number) => string[]) | undefined): Pick<ModelTable, 'host' | 'disk'> {
  return {
    ...(host.maxBytes > 0 ? { host: host.ids(TIER_LISTED_MAX, loaded) as ModelId[] } : {}),
    ...(diskIds !== undefined ? { disk: diskIds(TIER_LISTED_MAX) as ModelId[] } : {}),
  };
}

/** The host tier's gauges, set on each of its changes. */
export function setTierGauges(metrics: ReplicaMetrics, host: HostTier): void {
  metrics.hostTierBytes.set(host.bytes);
  metrics.hostTierModels.set(host.size);
}

/** The cache's gauges, set on each of its changes. */
export function setCacheGauges<T extends Releasable>(metrics: ReplicaMetrics, cache: ModelCache<T>): void {
  metrics.modelsLoaded.set(cache.loadedCount);
  metrics.modelsLoading.set(cache.loadingCount);
  metrics.bytesLoaded.set(cache.loadedBytes);
}

/** What went wrong, as a log line's `reason`: an Error's message, anything else (a rejection with a string) as it is. */
export const reasonOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** The log fields of a failed load: its stable code and what went wrong. */
export const failure = (error: unknown): { error: string; reason: string } => ({
  error: error instanceof ModelmuxError ? error.code : 'internal',
  reason: reasonOf(error),
});
