import type { Clock } from '../../common/clock.js';
import type { ModelId } from '../../common/model-id.js';
import { sortVersions } from '../../common/model-version.js';

/**
 * The versions of models in the store, as metadata lists them (`GET /v2/models/{id}`), each
 * listing reused for `ttlMs`: metadata is asked often by clients that start up, and a listing
 * is a request to the store. Concurrent asks share one listing; a failed one is not kept.
 * At most `maxEntries` models are remembered, the oldest listing forgotten first.
 */
export class VersionLists {
  private readonly entries = new Map<string, { at: number; versions: Promise<string[]> }>();

  constructor(
    private readonly list: (base: ModelId) => Promise<string[]>,
    private readonly clock: Clock,
    private readonly ttlMs: number,
    private readonly maxEntries: number,
  ) {}

  /** The versions of `base`, in numeric order. */
  get(base: ModelId): Promise<string[]> {
    const now = this.clock.now();
    const seen = this.entries.get(base);
    if (seen !== undefined && now - seen.at < this.ttlMs) return seen.versions;
    const versions = this.list(base).then(sortVersions);
    this.entries.delete(base);
    this.entries.set(base, { at: now, versions });
    versions.catch(() => {
      if (this.entries.get(base)?.versions === versions) this.entries.delete(base);
    });
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries) break;
      this.entries.delete(oldest);
    }
    return versions;
  }
}
