import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dirtyTreeRefusal, DirtyTreeError } from './clean-tree.js';
import type { BenchRun } from './cli-options.js';
import { machineLine, uncommittedFiles, type MachineInfo } from './machine.js';
import { mdTable } from './markdown.js';

/**
 * The one report writer of the bench programs: bench/results/<name>.json holds the run (command,
 * machine, date, commit, options), the tables as data and the raw measurements; <name>.md is the
 * same tables rendered. bench/results-page.ts builds bench/RESULTS.md from the JSON files.
 */

/** Bumped when the JSON's shape changes; the results page shows only files it can read. */
export const REPORT_FORMAT = 1;

export interface ReportTable {
  header: string[];
  rows: string[][];
}

export interface ReportSection {
  heading?: string;
  /** Markdown before the table. */
  text?: string;
  table?: ReportTable;
  /** Markdown after the table. */
  after?: string;
  /** Shown on bench/RESULTS.md; the other sections are only in <name>.md. */
  headline?: boolean;
}

/** What a program hands the writer. */
export interface BenchReport {
  title: string;
  /** What was run and how, in a paragraph or a few. */
  setup: string;
  sections: ReportSection[];
  /** The raw measurements, for whoever reads the JSON. */
  data: unknown;
}

/** The JSON file's shape. */
export interface ReportFile extends BenchReport {
  format: typeof REPORT_FORMAT;
  program: string;
  command: string;
  date: string;
  gitCommit: string;
  machine: MachineInfo;
  options: unknown;
  /** Seconds from the run's start to its report. */
  wallSeconds: number;
}

/** The checkout's top: dist/bench/lib or bench/lib, whichever runs, is below it. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('bench: no package.json above bench/lib');
    dir = up;
  }
  return dir;
}

export function sectionMarkdown(s: ReportSection, headingLevel = '###'): string {
  return [s.heading && `${headingLevel} ${s.heading}`, s.text, s.table && mdTable(s.table.header, s.table.rows), s.after].filter((x): x is string => Boolean(x)).join('\n\n');
}

/** Throws DirtyTreeError when `run` may not go on, or write, from a tree with these changes (clean-tree.ts). */
export function refuseDirtyTree(run: BenchRun<unknown>, uncommitted: readonly string[] | undefined): void {
  const why = dirtyTreeRefusal(run.program, repoRoot(), uncommitted, run.out, run.allowDirty);
  if (why !== undefined) throw new DirtyTreeError(why);
}

/** Said first in a report measured on uncommitted code (`--allow-dirty`), so no one takes it for a result. */
export const DEVELOPMENT_RUN = '**Development run (`--allow-dirty`) from a tree with uncommitted changes: not a result of the commit named below.**';

export function reportMarkdown(f: ReportFile): string {
  const dev = f.machine.uncommitted?.length === 0 ? [] : [DEVELOPMENT_RUN];
  return `${[`## ${f.title}`, ...dev, `Command: \`${f.command}\``, `Machine: ${machineLine(f.machine)}; ran ${f.wallSeconds.toFixed(0)} s`, f.setup, ...f.sections.map((s) => sectionMarkdown(s))].join('\n\n')}\n`;
}

export function reportFile<O>(run: BenchRun<O>, report: BenchReport, now = new Date()): ReportFile {
  return {
    format: REPORT_FORMAT,
    program: run.program,
    command: run.command,
    date: run.machine.date,
    gitCommit: run.machine.gitCommit,
    machine: run.machine,
    options: run.options,
    wallSeconds: (now.getTime() - Date.parse(run.machine.date)) / 1000,
    ...report,
  };
}

/**
 * Writes `<out>.json` and `<out>.md` and prints the markdown. The tree is looked at again here,
 * as at the start: a change made while the run measured is refused the same way, after the
 * markdown is printed, so the numbers are seen but not recorded.
 */
export async function writeReport<O>(run: BenchRun<O>, report: BenchReport): Promise<ReportFile> {
  const now = uncommittedFiles();
  const file = reportFile(run, report);
  if (now?.length !== 0) file.machine = { ...file.machine, uncommitted: now };
  const md = reportMarkdown(file);
  process.stdout.write(md);
  refuseDirtyTree(run, now);
  const out = resolve(repoRoot(), run.out);
  await mkdir(dirname(out), { recursive: true });
  await writeFile(`${out}.json`, JSON.stringify(file, null, 2) + '\n');
  await writeFile(`${out}.md`, md);
  return file;
}
