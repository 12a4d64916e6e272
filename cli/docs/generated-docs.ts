import { readdir, readFile } from 'node:fs/promises';
import { ADR_FILE, adrIndex, type AdrFile } from './adr-index.js';
import { cliPage } from './cli-page.js';
import { errorIndex } from './error-index.js';
import { fillRegion } from './generated-region.js';

/** A page, or part of one, written from its one source (the code, the ADRs' first lines): `npm run docs` writes it, a unit test compares. */
export interface GeneratedDoc {
  /** Relative to the repository root. */
  file: string;
  /** The page as it should be, given the page as it is (for pages generated in part). */
  render(current: string): Promise<string>;
}

/** Every ADR of docs/adr/. */
export async function readAdrs(dir = 'docs/adr'): Promise<AdrFile[]> {
  const names = (await readdir(dir)).filter((name) => ADR_FILE.test(name)).sort();
  return Promise.all(names.map(async (name) => ({ name, text: await readFile(`${dir}/${name}`, 'utf8') })));
}

export const GENERATED_DOCS: readonly GeneratedDoc[] = [
  { file: 'docs/cli.md', render: () => cliPage() },
  { file: 'docs/errors.md', render: (page) => Promise.resolve(fillRegion(page, 'errors', errorIndex())) },
  { file: 'docs/adr/README.md', render: async (page) => fillRegion(page, 'adr-index', adrIndex(await readAdrs())) },
];
