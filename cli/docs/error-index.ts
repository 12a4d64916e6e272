import { ERROR_CATALOGUE } from '../../common/errors.js';

/**
 * docs/errors.md's table of every code, its status and its summary, from the catalogue: the
 * page's sections explain each code; this table is never written by hand.
 */
export function errorIndex(): string {
  const rows = Object.entries(ERROR_CATALOGUE).map(([code, e]) => `| [\`${code}\`](#${code}) | ${e.status} | ${e.summary.replaceAll('|', '\\|')} |`);
  return ['| Code | Status | What it means |', '|---|---|---|', ...rows, ''].join('\n');
}
