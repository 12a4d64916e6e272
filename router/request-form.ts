import { ModelmuxError } from '../common/errors.js';
import { parseModelId, type ModelId } from '../common/model-id.js';
import { HEADER_RAY_MODEL_ID, HEADER_RAY_MODEL_ID_HYPHEN, HEADER_SAGEMAKER_MODEL } from '../common/names.js';

/**
 * Reads the model id a request is for, in the three request forms, from the path below the
 * route prefix: the V2 path (`/v2/models/<id>/...`), the Ray header on `POST /`, the SageMaker
 * header on `POST /invocations`. Other paths (`/v2/health/ready`, …) carry no model. Ids are
 * validated here, at the edge, before they reach a replica.
 */
export type RequestForm = 'v2' | 'ray' | 'sagemaker' | 'other';

export interface ParsedRequest {
  form: RequestForm;
  model: ModelId | undefined;
}

type HeaderBag = Record<string, string | string[] | undefined>;

function header(headers: HeaderBag, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The header names `parseRequestForm` reads, for a caller that collects only those. */
export const MODEL_HEADERS: readonly string[] = [HEADER_RAY_MODEL_ID, HEADER_RAY_MODEL_ID_HYPHEN, HEADER_SAGEMAKER_MODEL];

const V2_MODELS = '/v2/models/';

function validated(raw: string): ModelId {
  const check = parseModelId(raw);
  if (!check.ok) throw new ModelmuxError('invalid_model_id', check.reason);
  return check.id;
}

/** `rest` is the path below the route prefix, without the query string ('' or '/…'). */
export function parseRequestForm(method: string, rest: string, headers: HeaderBag): ParsedRequest {
  if (rest.startsWith(V2_MODELS) && rest.length > V2_MODELS.length && rest.charCodeAt(V2_MODELS.length) !== 47 /* '/' */) {
    const end = rest.indexOf('/', V2_MODELS.length);
    let raw = end === -1 ? rest.slice(V2_MODELS.length) : rest.slice(V2_MODELS.length, end);
    if (raw.includes('%')) {
      try {
        raw = decodeURIComponent(raw);
      } catch {
        throw new ModelmuxError('invalid_model_id', 'the model id in the path is not valid percent-encoding');
      }
    }
    return { form: 'v2', model: validated(raw) };
  }
  if ((rest === '' || rest === '/') && method === 'POST') {
    const raw = header(headers, HEADER_RAY_MODEL_ID) ?? header(headers, HEADER_RAY_MODEL_ID_HYPHEN);
    if (raw === undefined) throw new ModelmuxError('missing_model_id', `POST / needs the ${HEADER_RAY_MODEL_ID} header`);
    return { form: 'ray', model: validated(raw) };
  }
  if (rest === '/invocations') {
    const raw = header(headers, HEADER_SAGEMAKER_MODEL);
    if (raw === undefined) throw new ModelmuxError('missing_model_id', 'POST /invocations needs the X-Amzn-SageMaker-Target-Model header');
    return { form: 'sagemaker', model: validated(raw) };
  }
  return { form: 'other', model: undefined };
}
