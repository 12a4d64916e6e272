import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { ADR_FILE, adrHead, adrIndex } from '../../../cli/docs/adr-index.js';
import { readAdrs } from '../../../cli/docs/generated-docs.js';
import { repositoryPaths } from './repository-paths.js';

const index = readFileSync('docs/adr/README.md', 'utf8');
const files = readdirSync('docs/adr').filter((f) => f.endsWith('.md') && f !== 'README.md');
const adrs = await readAdrs();

/** The ADR files an index or status names, `[…](0042-two-controllers-one-cache.md…)`. */
const linkedFiles = (text: string): string[] => [...text.matchAll(/\]\((\d{4}-[a-z0-9-]+\.md)/g)].map((m) => m[1] ?? '');

describe('docs/adr/README.md', () => {
  it('lists every ADR of docs/adr/, each under a name the index reads', () => {
    expect(files.filter((f) => !ADR_FILE.test(f))).toEqual([]);
    const rows = index.split('\n').filter((line) => /^\| \[\d{4}\]/.test(line));
    expect(rows.map((row) => linkedFiles(row)[0]).sort()).toEqual(files.sort());
  });

  it('names in its rows only ADR files that exist', () => {
    const rows = index.split('\n').filter((line) => line.startsWith('| ['));
    expect(rows.flatMap(linkedFiles).filter((f) => !existsSync(`docs/adr/${f}`))).toEqual([]);
  });

  it('says why each number below the highest has no ADR', () => {
    const numbers = new Set(files.map((f) => Number(f.slice(0, 4))));
    const missing = Array.from({ length: Math.max(...numbers) }, (_v, i) => i + 1).filter((n) => !numbers.has(n));
    const explained = index.split('## Numbers without an ADR')[1] ?? '';
    expect(missing.map((n) => String(n).padStart(4, '0')).filter((n) => !explained.includes(n))).toEqual([]);
  });
});

describe('each ADR', () => {
  it.each(adrs.map((adr) => [adr.name, adr] as const))('%s opens with a status the index knows', (_name, adr) => {
    expect(adrHead(adr).status).toMatch(/^(accepted( \([^)]+\))?(, (amended|partly superseded) by .+)?|(partly )?superseded by .+)$/);
  });

  it.each(adrs.map((adr) => [adr.name, adr] as const))('%s names as its successors later ADRs that exist', (name, adr) => {
    // 0023 points at its own last section: not a successor.
    for (const successor of linkedFiles(adrHead(adr).status).filter((f) => f !== name)) {
      expect(existsSync(`docs/adr/${successor}`)).toBe(true);
      expect(successor > name).toBe(true);
    }
  });

  // A record keeps its time's words, its status line saying what changed since; one that no
  // later ADR changed describes the code as it is.
  it.each(adrs.filter((adr) => /^accepted( \([^)]+\))?$/.test(adrHead(adr).status)).map((adr) => [adr.name, adr] as const))(
    '%s, changed by no later ADR, names only files that exist outside its Context',
    (_name, adr) => {
      const outsideContext = adr.text.replace(/\n## Context\n[\s\S]*?(?=\n## )/, '\n');
      expect(repositoryPaths(outsideContext).filter((p) => !existsSync(p))).toEqual([]);
    },
  );
});

describe('the ADR index', () => {
  it('shows the first clause of each status, with links into the ADR itself made to work from the index', () => {
    const adr = { name: '0023-x.md', text: '# 0023 Title\n\nStatus: accepted, partly superseded by its [last section](#last) (issue 36): detail.\nMore.\n\n## Context\n' };
    expect(adrIndex([adr])).toContain('| [0023](0023-x.md) | Title | accepted, partly superseded by its [last section](0023-x.md#last) (issue 36) |');
  });

  it('refuses an ADR without a status line, so none is left out', () => {
    expect(() => adrIndex([{ name: '0043-x.md', text: '# 0043 Title\n\n## Context\n' }])).toThrow('0043-x.md: no "Status: …" paragraph under its title');
  });
});
