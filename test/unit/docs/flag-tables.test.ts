import { readFile } from 'node:fs/promises';
import { SUBCOMMANDS } from '../../../cli/commands.js';
import { DOC_PAGES } from './doc-pages.js';
import { markdownTables } from './markdown-tables.js';
import { documentedValue, programFlags, type ProgramFlag } from './program-flags.js';

// docs/cli.md is the programs' --help, written from it. Other pages group flags by what they
// bound (docs/limits.md) and so name them again: what they state of a flag is checked here.

/** Flags of other tools that the pages quote, with the tool. */
const OTHER_TOOLS: Record<string, string> = {
  'build-arg': 'docker build',
  set: 'helm',
  'feature-gates': 'kube-apiserver, kube-controller-manager',
  'horizontal-pod-autoscaler-sync-period': 'kube-controller-manager',
  'metrics-relist-interval': 'prometheus-adapter',
  'model-control-mode': 'tritonserver',
  omit: 'npm ci',
  help: 'every modelmux subcommand',
  selectProjects: 'jest',
};

const flags = new Map<string, Map<string, ProgramFlag>>();
beforeAll(async () => {
  for (const command of Object.keys(SUBCOMMANDS)) flags.set(command, await programFlags(command));
});

function flagOf(program: string, flag: string): ProgramFlag | undefined {
  return flags.get(program)?.get(flag);
}

/** `--flag` followed by its value, as the tables write it: `--max-body-bytes` 8Mi, `--port` (8000; …), `--write-timeout-ms` 30 s. */
const FLAG_WITH_VALUE = /`--([a-z0-9-]+)` \(?(-?\d[\d,]*(?:\.\d+)?(?: s| min|Ki|Mi|Gi)?)(?=[\s:;),]|$)/g;

/** The program a column of a table speaks of: `HTTP/1.1 (router)`, `gRPC (replica)`. */
const programOfHeader = (cell: string): string | undefined => /\((router|replica)\)/.exec(cell)?.[1];

describe('flags named in the documentation', () => {
  it('exist in a modelmux program, or are another tool’s', async () => {
    const known = new Set([...flags.values()].flatMap((m) => [...m.keys()]));
    const unknown: string[] = [];
    for (const page of DOC_PAGES) {
      for (const m of (await readFile(page, 'utf8')).matchAll(/`--([a-zA-Z0-9-]+)/g)) {
        const flag = m[1] ?? '';
        if (!known.has(flag) && OTHER_TOOLS[flag] === undefined) unknown.push(`${page}: --${flag}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('have the variable and the default docs/limits.md gives them in its tables of router flags', async () => {
    const tables = markdownTables(await readFile('docs/limits.md', 'utf8')).filter((t) => t.header.slice(0, 3).join('|') === 'Flag|Env|Default');
    expect(tables.length).toBeGreaterThanOrEqual(4);
    const wrong: string[] = [];
    for (const row of tables.flatMap((t) => t.rows)) {
      const [flagCell = '', envCell = '', defaultCell = ''] = row;
      const flag = /^`--([a-z0-9-]+)`$/.exec(flagCell)?.[1] ?? flagCell;
      const declared = flagOf('router', flag);
      if (declared === undefined) {
        wrong.push(`${flagCell}: not a router flag`);
        continue;
      }
      if (envCell !== `\`${declared.env}\``) wrong.push(`${flagCell}: variable ${envCell}, the router's is ${declared.env}`);
      // `8Mi` (note), `--host` (another flag's value), none: only a plain value is a default of the flag's own.
      const value = /^`([^`]+)`/.exec(defaultCell)?.[1];
      const stated = value === undefined || value.startsWith('--') ? undefined : documentedValue(flag, value);
      if (stated !== declared.default) wrong.push(`${flagCell}: default ${defaultCell}, the router's is ${String(declared.default)}`);
    }
    expect(wrong).toEqual([]);
  });

  it('have the defaults the pages state beside them in tables that say whose flags they are', async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const page of DOC_PAGES) {
      for (const table of markdownTables(await readFile(page, 'utf8'))) {
        const processColumn = table.header.indexOf('Process');
        for (const row of table.rows) {
          row.forEach((cell, column) => {
            const program = processColumn === -1 ? programOfHeader(table.header[column] ?? '') : row[processColumn];
            if (program === undefined) return;
            for (const m of cell.matchAll(FLAG_WITH_VALUE)) {
              const flag = m[1] ?? '';
              const declared = flagOf(program, flag);
              checked++;
              const stated = documentedValue(flag, m[2] ?? '');
              if (declared === undefined || stated !== declared.default) wrong.push(`${page}: ${program} --${flag} ${m[2]}, declared ${declared === undefined ? 'nowhere' : String(declared.default)}`);
            }
          });
        }
      }
    }
    expect(wrong).toEqual([]);
    // The side-by-side table of docs/limits.md and README's ports, at least.
    expect(checked).toBeGreaterThan(20);
  });
});
