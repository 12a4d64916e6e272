import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';

// The folders' contract (docs/testing.md): harness/ holds the real parts the tests and the
// benchmarks start, with no jest in it; bench/ imports harness/, never test/; tests never import
// bench/. A benchmark that reached into test/ would drag assertions and fixtures with it.

async function tsFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

/** Each file's relative imports, as folders of the checkout they land in (`test/helpers`, `harness`…). */
async function importedFolders(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => relative(process.cwd(), resolve(dirname(file), m[1] ?? '')));
}

async function importsInto(folders: readonly string[], into: string): Promise<string[]> {
  const found: string[] = [];
  for (const folder of folders) {
    for (const f of await tsFiles(folder)) {
      for (const target of await importedFolders(f)) if (target === into || target.startsWith(`${into}/`)) found.push(`${f} → ${target}`);
    }
  }
  return found;
}

describe('the folder layout', () => {
  it('keeps bench/ and harness/ off test/', async () => {
    expect(await importsInto(['bench', 'harness'], 'test')).toEqual([]);
  });

  it('keeps the tests off bench/', async () => {
    expect(await importsInto(['test'], 'bench')).toEqual([]);
  });

  it('keeps the router off replica/: what both read (tensors, request bodies) lives in common/', async () => {
    expect(await importsInto(['router'], 'replica')).toEqual([]);
  });

  it('keeps jest out of harness/', async () => {
    const withJest: string[] = [];
    for (const f of await tsFiles('harness')) if (/@jest\/globals|(?<![.\w])(expect|it|test|beforeAll|afterAll)\(/.test(await readFile(f, 'utf8'))) withJest.push(f);
    expect(withJest).toEqual([]);
  });
});
