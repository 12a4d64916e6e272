import { ERROR_CATALOGUE, type ErrorCode } from '../../common/errors.js';

/**
 * The error types of the sagemaker-runtime API (botocore's service model, protocol rest-json):
 * the client reads the type from the `x-amzn-ErrorType` header and the members from the JSON
 * body (`message`, and for ModelError `OriginalStatusCode` and `OriginalMessage`), so boto3
 * raises `client.exceptions.ValidationError`, `ModelError`, `ServiceUnavailable` or
 * `InternalFailure` as it does against SageMaker.
 */
export type RuntimeErrorType = 'ValidationError' | 'ModelError' | 'ServiceUnavailable' | 'InternalFailure';

const RUNTIME_ERROR_STATUS: Readonly<Record<RuntimeErrorType, number>> = { ValidationError: 400, ModelError: 424, ServiceUnavailable: 503, InternalFailure: 500 };

/**
 * Codes SageMaker answers itself for a call it will not hand to the model: the request, the
 * endpoint or the model named are not valid or not there (SageMaker answers a TargetModel
 * missing from S3 with ValidationError too).
 */
const VALIDATION = new Set<ErrorCode>([
  'invalid_model_id',
  'missing_model_id',
  'invalid_runtime_request',
  'model_header_in_connection',
  'bad_request',
  'not_found',
  'route_not_found',
  'model_not_found',
  'body_too_large',
  'headers_too_large',
  'request_timeout',
]);

/** Codes of the service, not the model: try again later (botocore's standard retry mode retries these itself). */
function unavailable(code: ErrorCode): boolean {
  const status = ERROR_CATALOGUE[code].status;
  return status === 503 || status === 429 || code === 'upstream_unavailable';
}

export interface RuntimeError {
  type: RuntimeErrorType;
  status: number;
  body: string;
}

function catalogued(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CATALOGUE, code);
}

/** The error code and message of a modelmux error body, if `text` is one. */
function modelmuxError(text: string): { code: ErrorCode; message: string } | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    const { error, message } = parsed as { error?: unknown; message?: unknown };
    return catalogued(error) ? { code: error, message: typeof message === 'string' ? message : '' } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The runtime API's answer to an error answer of `status` with body `text` (modelmux's JSON
 * error, or whatever a sidecar runtime answered). What the model refused or failed at is a
 * ModelError carrying the original status and body, as SageMaker reports a container's non-2xx
 * answer; the rest by its code. Pure.
 */
export function runtimeError(status: number, text: string): RuntimeError {
  const e = modelmuxError(text);
  let type: RuntimeErrorType = 'ModelError';
  if (e !== undefined) {
    if (VALIDATION.has(e.code)) type = 'ValidationError';
    else if (unavailable(e.code)) type = 'ServiceUnavailable';
    else if (e.code === 'internal') type = 'InternalFailure';
  }
  if (type !== 'ModelError') return { type, status: RUNTIME_ERROR_STATUS[type], body: JSON.stringify({ message: `${e?.message ?? text} (${e?.code ?? status})` }) };
  const side = status >= 500 ? 'server' : 'client';
  const message = `Received ${side} error (${status}) from model with message "${text}".`;
  return { type, status: RUNTIME_ERROR_STATUS.ModelError, body: JSON.stringify({ message, OriginalStatusCode: status, OriginalMessage: text }) };
}
