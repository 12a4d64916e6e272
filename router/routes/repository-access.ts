import { createHash, timingSafeEqual } from 'node:crypto';
import { ModelmuxError } from '../../common/errors.js';

/**
 * Who may call the model repository API (`…/v2/repository/models/{id}/load`, `…/unload`,
 * `…/v2/repository/index`) on a listener. An unload reaches every replica of a route and a load
 * can evict any model, so on the public port one anonymous client could empty a pool or turn
 * everyone's calls into cold loads: there the API is refused unless a token was configured.
 * The admin port is open: it is guarded by where it listens (docs/limits.md).
 */
export interface RepositoryAccess {
  /** The error to answer a repository call with `rawHeaders` (flat `[name, value, …]`), or undefined to serve it. */
  refusal(rawHeaders: readonly string[]): ModelmuxError | undefined;
}

/** The admin port's: every caller. */
export const REPOSITORY_OPEN: RepositoryAccess = { refusal: () => undefined };

/**
 * The public port's: with no `token`, nobody (403 `repository_api_disabled`, naming the admin
 * port); with one, callers that send it as `Authorization: Bearer <token>` (else 401
 * `repository_api_unauthorized`). The token is compared by its SHA-256 digest in constant time,
 * so neither its bytes nor its length show in the answer's timing.
 */
export function publicRepositoryAccess(token: string | undefined, adminPort: number): RepositoryAccess {
  if (token === undefined) {
    const where = adminPort === -1 ? 'this router has no admin port (--admin-port=-1)' : `call the router's admin port (${adminPort === 0 ? 'chosen at start' : adminPort})`;
    const refused = new ModelmuxError('repository_api_disabled', `the model repository API is not served on the public port: ${where}, or start the router with --repository-api-token`);
    return { refusal: () => refused };
  }
  const expected = digest(token);
  return {
    refusal: (rawHeaders) => {
      const given = bearerToken(rawHeaders);
      if (given !== undefined && timingSafeEqual(digest(given), expected)) return undefined;
      return new ModelmuxError(
        'repository_api_unauthorized',
        given === undefined ? 'the model repository API on the public port needs Authorization: Bearer <the --repository-api-token>' : 'the bearer token is not the --repository-api-token',
      );
    },
  };
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

const BEARER = /^bearer +([^\s]+) *$/i;

/** The token of the one Authorization header, if it is a Bearer one; two such headers name none. */
export function bearerToken(rawHeaders: readonly string[]): string | undefined {
  let value: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() !== 'authorization') continue;
    if (value !== undefined) return undefined;
    value = rawHeaders[i + 1];
  }
  return value === undefined ? undefined : BEARER.exec(value)?.[1];
}
