import { createHash } from 'node:crypto';
import { z } from 'zod';
import { BloomFilter, bloomShape, MAX_HASHES } from './bloom-filter.js';
import { modelTableSchema, type ModelTable } from './model-table.js';

/**
 * The `modelmux.io/models` pod annotation, bounded whatever the replica holds (ADR 0029):
 *
 * - **full**: the model table itself (common/model-table.ts) while its JSON is at most
 *   FULL_TABLE_MAX_BYTES; a router reads it as is;
 * - **compact**: past that, the version, counts, capacity and bytes, a digest of the loaded and
 *   loading sets, and a Bloom filter of their union. A router fetches the exact table from the
 *   replica's `GET /models` when the digest differs from the table it holds.
 *
 * The API server refuses a pod whose annotations total more than 256 KiB; a compact annotation
 * is at most TABLE_ANNOTATION_MAX_BYTES whatever the table holds, a full one at most
 * FULL_TABLE_MAX_BYTES.
 */

/** Largest full-form annotation: about 190 ids of 40 characters, or 2,000 of 1. */
export const FULL_TABLE_MAX_BYTES = 8 * 1024;
/** The bound of every annotation value this module writes, a quarter of the API server's limit. */
export const TABLE_ANNOTATION_MAX_BYTES = 64 * 1024;
/** What a compact filter is sized for: one id in a thousand not held reads as held. */
export const FILTER_FALSE_POSITIVE_RATE = 0.001;
/**
 * Filter bytes at most, leaving room for the other fields under TABLE_ANNOTATION_MAX_BYTES once
 * base64 makes 4 characters of every 3 bytes. 10,064 ids (10,000 loaded and 64 loading) need
 * 18 KB; only a set of more than 25,000 would get a filter this size with a higher rate.
 */
export const MAX_FILTER_BYTES = 45 * 1024;

/** What a compact annotation says; the ids themselves come from the replica's `GET /models`. */
export interface TableSummary {
  version: number;
  capacity: number;
  bytes?: number;
  maxBytes?: number;
  loadedCount: number;
  loadingCount: number;
  /** tableDigest of the table at `version`. */
  digest: string;
  /** Holds every loaded and loading id of that table. */
  filter: BloomFilter;
}

export type TableAnnotation = { form: 'full'; table: ModelTable } | { form: 'compact'; summary: TableSummary };

const compactSchema = z.object({
  version: z.number().int().nonnegative(),
  capacity: z.number().int().positive(),
  bytes: z.number().int().nonnegative().optional(),
  maxBytes: z.number().int().positive().optional(),
  loadedCount: z.number().int().nonnegative(),
  loadingCount: z.number().int().nonnegative(),
  digest: z.string().regex(/^[0-9a-f]{32}$/),
  filter: z.object({
    bits: z
      .number()
      .int()
      .min(8)
      .max(MAX_FILTER_BYTES * 8),
    hashes: z.number().int().min(1).max(MAX_HASHES),
    data: z.string().max(Math.ceil(MAX_FILTER_BYTES / 3) * 4),
  }),
});

/**
 * 128 bits of SHA-256 over the sorted loaded ids, then the sorted loading ids: equal exactly when
 * the two sets are (ids cannot hold a newline). The recency order is left out: it changes with
 * every hit and a router needs it only for the next victim, which a later table corrects.
 */
export function tableDigest(table: Pick<ModelTable, 'loaded' | 'loading'>): string {
  const text = [...table.loaded].sort().join('\n') + '\n\n' + [...table.loading].sort().join('\n');
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}

/** The annotation value for `table`: full while small, else compact. */
export function encodeTableAnnotation(table: ModelTable): string {
  // Ids need no JSON escaping (model-id.ts), so their JSON costs length + 3 bytes each: a
  // table known to be too large for the full form is never stringified whole.
  let idBytes = 0;
  for (const id of table.loaded) idBytes += id.length + 3;
  for (const id of table.loading) idBytes += id.length + 3;
  if (idBytes <= FULL_TABLE_MAX_BYTES) {
    const full = JSON.stringify(table);
    if (full.length <= FULL_TABLE_MAX_BYTES) return full;
  }
  const entries = table.loaded.length + table.loading.length;
  const { bits, hashes } = bloomShape(entries, FILTER_FALSE_POSITIVE_RATE, MAX_FILTER_BYTES * 8);
  const filter = BloomFilter.empty(bits, hashes);
  for (const id of table.loaded) filter.add(id);
  for (const id of table.loading) filter.add(id);
  return JSON.stringify({
    version: table.version,
    capacity: table.capacity,
    ...(table.bytes !== undefined ? { bytes: table.bytes } : {}),
    ...(table.maxBytes !== undefined ? { maxBytes: table.maxBytes } : {}),
    loadedCount: table.loaded.length,
    loadingCount: table.loading.length,
    digest: tableDigest(table),
    filter: { bits, hashes, data: filter.toBase64() },
  });
}

/** Reads either form; garbage, a missing value or an oversized one gives undefined, never a throw. */
export function parseTableAnnotation(raw: string | undefined): TableAnnotation | undefined {
  if (raw === undefined || raw.length > TABLE_ANNOTATION_MAX_BYTES) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (typeof json === 'object' && json !== null && 'digest' in json) {
    const c = compactSchema.safeParse(json);
    if (!c.success) return undefined;
    const { filter: f, ...rest } = c.data;
    const filter = BloomFilter.fromBase64(f.bits, f.hashes, f.data);
    if (filter === undefined) return undefined;
    const summary: TableSummary = { version: rest.version, capacity: rest.capacity, loadedCount: rest.loadedCount, loadingCount: rest.loadingCount, digest: rest.digest, filter };
    if (rest.bytes !== undefined) summary.bytes = rest.bytes;
    if (rest.maxBytes !== undefined) summary.maxBytes = rest.maxBytes;
    return { form: 'compact', summary };
  }
  const t = modelTableSchema.safeParse(json);
  return t.success ? { form: 'full', table: t.data } : undefined;
}

/**
 * Largest `GET /models` body a router reads: 10,000 loaded ids of the longest kind are 2 MB;
 * the rest leaves room for about 30,000 more loading at once.
 */
export const MAX_TABLE_JSON_BYTES = 8 * 1024 * 1024;
