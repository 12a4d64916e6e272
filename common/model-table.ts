import { z } from 'zod';
import { modelIdSchema } from './model-id.js';

/**
 * Ids a table lists per warm tier at most (the host and disk lists): a router keeps them for every
 * replica, so they stay a small fixed share of what it keeps of the loaded lists (ADR 0029). Not
 * a bound of the schema: a router keeps the first this many of a longer list (a later replica's),
 * rather than refuse the whole table.
 */
export const TIER_LISTED_MAX = 32;

/**
 * The loaded-model table a replica publishes in its pod annotation and on `GET /models`.
 * `version` grows with every change so a reader can drop stale copies.
 */
export const modelTableSchema = z.object({
  version: z.number().int().nonnegative(),
  /**
   * Most recently used first, so the last entry is the model the next load evicts; the router
   * uses it to spare replicas whose victim is still wanted (router/placement/placement.ts).
   */
  loaded: z.array(modelIdSchema),
  loading: z.array(modelIdSchema),
  capacity: z.number().int().positive(),
  bytes: z.number().int().nonnegative().optional(),
  maxBytes: z.number().int().positive().optional(),
  /**
   * Models evicted from the device but whose bytes the replica keeps in host memory (ADR 0047),
   * most recently demoted first, at most TIER_LISTED_MAX: a load of one skips the disk and the
   * store. Absent from replicas without a host tier and from tables of older replicas.
   */
  host: z.array(modelIdSchema).optional(),
  /** Models whose files the replica keeps on its disk (S3 stores), most recently used first, at most TIER_LISTED_MAX. */
  disk: z.array(modelIdSchema).optional(),
});

export type ModelTable = z.infer<typeof modelTableSchema>;

/** Parses an annotation value; garbage or a missing value gives undefined, never a throw. */
export function parseModelTable(raw: string | undefined): ModelTable | undefined {
  if (raw === undefined) return undefined;
  try {
    const r = modelTableSchema.safeParse(JSON.parse(raw));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}
