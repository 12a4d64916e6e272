import { z } from 'zod';
import { versionedIdProblem } from './model-version.js';

/** Longest model id accepted, slashes of an archive key included: it becomes one S3 key and one file name. */
export const MAX_MODEL_ID_LENGTH = 200;

const MODEL_ID_CHARS = /^[A-Za-z0-9._~@:+=-]+$/;

/** The endings of a model.tar.gz archive's key (SageMaker's artifact). */
const ARCHIVE_ENDINGS = ['.tar.gz', '.tgz'];

/**
 * A model id that names an archive object in the store (`wine-3.tar.gz`, `tenant/7/model.tar.gz`:
 * SageMaker's model.tar.gz artifact, by its key relative to the store's prefix) rather than a
 * model folder; never a versioned id.
 */
export function isArchiveId(id: string): boolean {
  return !id.includes('@') && ARCHIVE_ENDINGS.some((end) => id.endsWith(end));
}

/**
 * A model id is a single path segment, joined into `<root>/<id>/model.onnx` for the store, or an
 * archive key (isArchiveId) of such segments joined by `/`, as SageMaker multi-model endpoints
 * name their models (`tenant/7/model.tar.gz`): the object `<root>/<key>`. Nothing in either can
 * climb out of the store's prefix: no empty, `.` or `..` segment (so no leading, trailing or
 * doubled slash), no `..` anywhere. Inside modelmux an archive key stays one opaque string; where
 * an id becomes a file, folder or URL path segment it is written by idSegment. `@` only ever
 * separates a version: `id@v` is version `v` of `id`, stored at `<root>/<id>/<v>/model.onnx`
 * (common/model-version.ts). This is the one statement of the rule: it returns why `raw` is
 * refused, or undefined. Plain checks rather than a zod chain, because every request passes here
 * (router and replica); the schema below calls it too.
 */
function modelIdProblem(raw: string): string | undefined {
  if (raw.length === 0) return 'model id is empty';
  if (raw.length > MAX_MODEL_ID_LENGTH) return `model id is longer than ${MAX_MODEL_ID_LENGTH} characters`;
  const segments = raw.split('/');
  if (segments.length > 1 && !isArchiveId(raw)) return 'only an archive key (ending .tar.gz or .tgz) may hold "/" in a model id';
  for (const segment of segments) {
    if (segment === '') return 'an archive key may not start or end with "/" or hold "//"';
    if (!MODEL_ID_CHARS.test(segment)) return 'model id may hold only letters, digits and . _ ~ @ : + = - (and "/" between the folders of an archive key)';
    if (segment === '.' || segment.includes('..')) return segments.length > 1 ? 'an archive key may not hold a "." segment or ".."' : 'model id may not contain ".."';
  }
  return versionedIdProblem(raw);
}

/**
 * The id as one file name, folder name or URL path segment: `/` (only ever in an archive key)
 * written `%2F`, every other character as it is, so the ids without a slash keep their names.
 * `%` is never a character of an id, so the name reads back unambiguously; a URL decodes it to
 * the id (common/request-grammar.ts).
 */
export function idSegment(id: string): string {
  return id.replaceAll('/', '%2F');
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
