import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { DOC_PAGES } from './doc-pages.js';
import { brokenLinks, repositoryPaths } from './repository-paths.js';

// Files move (router/ and replica/ were split into folders by concern); a page that still
// names the old place sends a newcomer to code that no longer exists.
describe('the documentation', () => {
  it('names only files of the repository that exist', async () => {
    const named = (await Promise.all(DOC_PAGES.map(async (page) => repositoryPaths(await readFile(page, 'utf8')).map((path) => ({ page, path }))))).flat();
    expect(named.length).toBeGreaterThan(100);
    expect(named.filter(({ path }) => !existsSync(path)).map(({ page, path }) => `${page}: ${path}`)).toEqual([]);
  });

  it('links only to files that exist', async () => {
    const broken: string[] = [];
    for (const page of [...DOC_PAGES, 'docs/adr/README.md']) broken.push(...brokenLinks(page, await readFile(page, 'utf8')).map((l) => `${page}: ${l}`));
    expect(broken).toEqual([]);
  });
});
