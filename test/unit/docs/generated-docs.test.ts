import { readFile } from 'node:fs/promises';
import { GENERATED_DOCS } from '../../../cli/docs/generated-docs.js';
import { fillRegion } from '../../../cli/docs/generated-region.js';

describe('the generated documentation', () => {
  it.each(GENERATED_DOCS.map((doc) => [doc.file, doc] as const))(
    '%s is what `npm run docs` writes from the code',
    async (_file, doc) => {
      const current = await readFile(doc.file, 'utf8');
      expect(current).toBe(await doc.render(current));
    },
    30_000,
  );
});

describe('a generated region of a hand-written page', () => {
  const page = 'intro\n<!-- generated: t (do not edit) -->\nold\n<!-- end generated: t -->\nafter\n';

  it('replaces what lies between its markers and nothing else', () => {
    expect(fillRegion(page, 't', 'new\n')).toBe('intro\n<!-- generated: t (do not edit) -->\nnew\n<!-- end generated: t -->\nafter\n');
  });

  it('refuses a page that lost a marker, so a region is never silently dropped', () => {
    expect(() => fillRegion('intro\n', 't', 'x')).toThrow('no "<!-- generated: t … -->" line');
    expect(() => fillRegion('<!-- generated: t (x) -->\nold\n', 't', 'x')).toThrow('no "<!-- end generated: t -->" line');
  });
});
