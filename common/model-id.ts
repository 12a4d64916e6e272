import { z } from 'zod';
import { versionedIdProblem } from './model-version.js';

/** Longest model id accepted: it becomes one S3 key segment and one file name. */
export const MAX_MODEL_ID_LENGTH = 200;

const MODEL_ID_CHARS = /^[A-Za-z0-9._~@:+=-]+$/;

/**
 * A model id is a single path segment: it is joined into `<root>/<id>/model.onnx` for the store
 * and the on-disk cache, so anything that could climb out of that folder is refused before it
 * reaches either. `@` only ever separates a version: `id@v` is version `v` of `id`, stored at
 * `<root>/<id>/<v>/model.onnx` (common/model-version.ts). This is the one statement of the rule:
 * it returns why `raw` is refused, or undefined. Plain checks rather than a zod chain, because
 * every request passes here (router and replica); the schema below calls it too.
 */
function modelIdProblem(raw: string): string | undefined {
  if (raw.length === 0) return 'model id is empty';
  if (raw.length > MAX_MODEL_ID_LENGTH) return `model id is longer than ${MAX_MODEL_ID_LENGTH} characters`;
  if (!MODEL_ID_CHARS.test(raw)) return 'model id may hold only letters, digits and . _ ~ @ : + = -';
  if (raw === '.' || raw.includes('..')) return 'model id may not contain ".."';
  return versionedIdProblem(raw);
}

export const modelIdSchema = z
  .string()
  .superRefine((s, ctx) => {
    const problem = modelIdProblem(s);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  })
  .brand<'ModelId'>();

export type ModelId = z.infer<typeof modelIdSchema>;

export type ModelIdCheck = { ok: true; id: ModelId } | { ok: false; reason: string };

export function parseModelId(raw: string): ModelIdCheck {
  const reason = modelIdProblem(raw);
  return reason === undefined ? { ok: true, id: raw as ModelId } : { ok: false, reason };
}
