import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CATALOGUE, type ErrorCode } from '../../common/errors.js';

const doc = readFileSync(join(process.cwd(), 'docs/errors.md'), 'utf8');

/** The text of the `## \`code\`` section, up to the next heading. */
function section(code: string): string | undefined {
  const start = doc.indexOf(`## \`${code}\``);
  if (start === -1) return undefined;
  const next = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, next === -1 ? undefined : next);
}

describe('docs/errors.md', () => {
  it.each(Object.keys(ERROR_CATALOGUE) as ErrorCode[])('documents %s with its status and what to do', (code) => {
    const text = section(code);
    expect(text).toBeDefined();
    expect(text).toContain(`Status **${ERROR_CATALOGUE[code].status}**`);
    expect(text).toMatch(/What to do:/);
  });

  it('documents no code that the catalogue lacks', () => {
    const documented = [...doc.matchAll(/^## `([a-z_]+)`/gm)].map((m) => m[1]);
    expect(documented.sort()).toEqual(Object.keys(ERROR_CATALOGUE).sort());
  });
});
