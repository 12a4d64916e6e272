import { ModelmuxError } from '../../common/errors.js';
import type { ModelTable } from '../../common/model-table.js';
import { splitModelId } from '../../common/model-version.js';
import { indexRequestSchema, type IndexEntry } from '../../common/repository-index.js';

/**
 * `POST /v2/repository/index` of the model repository extension, pure. A replica's repository
 * is what it holds: its loaded models (READY) and those loading (LOADING). The store's other
 * models are not listed: finding them would mean listing the bucket, and any of them loads on
 * its first request (or `…/load`). A version `id@v` is listed as the protocol names it, name `id`
 * and version `v`; a default version has no number and is listed without one.
 */

function entry(id: string, state: IndexEntry['state']): IndexEntry {
  const { base, version } = splitModelId(id);
  return { name: base, ...(version !== undefined ? { version } : {}), state };
}

/** The index for an index request's JSON body (`{}` or `{"ready": true}`; none is `{}`). */
export function repositoryIndex(table: ModelTable, body: unknown): IndexEntry[] {
  const r = indexRequestSchema.safeParse(body ?? {});
  if (!r.success) throw new ModelmuxError('invalid_request', `not a repository index request: ${r.error.issues[0]?.message ?? 'invalid'}`);
  const ready = table.loaded.map((id) => entry(id, 'READY'));
  if (r.data.ready === true) return ready;
  return [...ready, ...table.loading.map((id) => entry(id, 'LOADING'))];
}
