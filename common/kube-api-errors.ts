import { ApiException } from '@kubernetes/client-node';

/** The HTTP status of a failed client-node call, if it got that far. */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/**
 * What went wrong, in one line: the API server's own message ("… must be no more than 63
 * characters") rather than client-node's dump of the whole response.
 */
export function apiErrorMessage(err: unknown): string {
  if (!(err instanceof ApiException)) return err instanceof Error ? err.message : String(err);
  const body: unknown = typeof err.body === 'string' ? parseJson(err.body) : err.body;
  const message = typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string' ? body.message : String(err.body).slice(0, 200);
  return `${err.code} ${message}`;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
