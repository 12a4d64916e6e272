import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';

// The folders' contract (docs/testing.md, docs/architecture.md): harness/ holds the real parts the
// tests and the benchmarks start, with no jest in it; bench/ imports harness/, never test/; tests
// never import bench/. A benchmark that reached into test/ would drag assertions and fixtures with
// it. The programs (router/, replica/, operator/) import common/ and never each other; common/
// imports no program; and no file of product code reaches itself through its imports.

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

/** Each file's relative imports (type-only ones too: a cycle of types is a cycle of design), as files of the checkout. */
async function importedFiles(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8');
  return [...text.matchAll(/^(?:import|export)\b[^;]*?\sfrom\s*'(\.{1,2}\/[^']+)'/gm), ...text.matchAll(/\bimport\(\s*'(\.{1,2}\/[^']+)'\s*\)/g)].map((m) =>
    relative(process.cwd(), resolve(dirname(file), (m[1] ?? '').replace(/\.js$/, '.ts'))),
  );
}

/** The import cycles among `files` (strongly connected components of more than one file, or a file importing itself). */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

const PRODUCT = ['common', 'router', 'replica', 'operator', 'cli'];
const PROGRAMS = ['router', 'replica', 'operator'];

describe('the folder layout', () => {
  it('has no import cycle in product code', async () => {
    const graph = new Map<string, string[]>();
    for (const folder of PRODUCT) for (const f of await tsFiles(folder)) graph.set(relative(process.cwd(), f), await importedFiles(f));
    expect(graph.size).toBeGreaterThan(200);
    // The edges are read: type-only imports and dynamic ones count.
    expect(graph.get('router/main.ts')).toContain('router/exchange/dispatch.ts');
    expect(graph.get('router/http1/server.ts')).toContain('router/exchange/dispatch.ts');
    expect(graph.get('cli/commands.ts')).toContain('router/main.ts');
    expect(cycles(graph)).toEqual([]);
  });

  it('finds a cycle when there is one (the check above can fail)', () => {
    expect(
      cycles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
    ).toEqual([['a', 'b', 'c']]);
    expect(cycles(new Map([['a', ['a']]]))).toEqual([['a']]);
    expect(
      cycles(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('keeps each program off the others, and common/ off every program', async () => {
    const crossings: string[] = [];
    for (const program of PROGRAMS) for (const other of PROGRAMS.filter((p) => p !== program)) crossings.push(...(await importsInto([program], other)));
    for (const program of [...PROGRAMS, 'cli']) crossings.push(...(await importsInto(['common'], program)));
    expect(crossings).toEqual([]);
  });

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
