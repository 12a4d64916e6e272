import { z } from 'zod';

/** Longest model id accepted: it becomes one S3 key segment and one file name. */
export const MAX_MODEL_ID_LENGTH = 200;

/**
 * A model id is a single path segment: it is joined into `<root>/<id>/model.onnx` for the store
 * and the on-disk cache, so anything that could climb out of that folder is refused before it
 * reaches either.
 */
export const modelIdSchema = z
  .string()
  .min(1, 'model id is empty')
  .max(MAX_MODEL_ID_LENGTH, `model id is longer than ${MAX_MODEL_ID_LENGTH} characters`)
  .regex(/^[A-Za-z0-9._~@:+=-]+$/, 'model id may hold only letters, digits and . _ ~ @ : + = -')
  .refine((s) => s !== '.' && !s.includes('..'), 'model id may not contain ".."')
  .brand<'ModelId'>();

export type ModelId = z.infer<typeof modelIdSchema>;

export type ModelIdCheck = { ok: true; id: ModelId } | { ok: false; reason: string };

export function parseModelId(raw: string): ModelIdCheck {
  const r = modelIdSchema.safeParse(raw);
  if (r.success) return { ok: true, id: r.data };
  return { ok: false, reason: r.error.issues[0]?.message ?? 'invalid model id' };
}
