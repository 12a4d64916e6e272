import { z } from 'zod';
import { modelIdSchema } from './model-id.js';

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
