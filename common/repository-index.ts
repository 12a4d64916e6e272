import { z } from 'zod';

/**
 * The shapes of `POST /v2/repository/index` (the V2 model repository extension), shared by the
 * replica, which answers it for what it holds, and the router, which merges its replicas'
 * answers.
 */

/** `version`: absent for a model's default version, which has no number (docs/adr/0033-model-versions.md). */
export const indexEntrySchema = z.object({ name: z.string(), version: z.string().optional(), state: z.enum(['READY', 'LOADING']) });
/** An index; what an entry holds beyond these fields is not passed on. */
export const indexSchema = z.array(indexEntrySchema);
/** The request body: `{}` or `{"ready": true}` (none is `{}`). */
export const indexRequestSchema = z.looseObject({ ready: z.boolean().optional() });

export type IndexEntry = z.infer<typeof indexEntrySchema>;
