import { tmpdir } from 'node:os';
import { isAbsolute, join, relative, resolve } from 'node:path';

/**
 * bench/results/ holds only runs of a commit: a number measured on uncommitted code cannot be
 * reproduced, and RESULTS.md would present it as the commit's. A development run says so with
 * `--allow-dirty`; its report then goes outside the checkout, here, unless `--out` says where.
 */
export const DEV_RESULTS_DIR = join(tmpdir(), 'modelmux-bench');

/** A run refused because of the working tree; runBench prints the message alone and exits 1. */
export class DirtyTreeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DirtyTreeError';
  }
}

/** At most this many changed files are named in the message. */
const NAMED = 10;

function named(files: readonly string[]): string {
  const more = files.length > NAMED ? `\n  … and ${files.length - NAMED} more` : '';
  return `${files
    .slice(0, NAMED)
    .map((f) => `  ${f}`)
    .join('\n')}${more}`;
}

/** Whether `out` (relative to `root` or absolute) lands in the committed results folder. */
export function inResultsFolder(root: string, out: string): boolean {
  const rel = relative(resolve(root, 'bench', 'results'), resolve(root, out));
  return !rel.startsWith('..') && !isAbsolute(rel);
}

/**
 * Why a run of `program` may not go on, or undefined when it may. `uncommitted` is what
 * MachineInfo holds: the changed files (the results folder left out), undefined when git could
 * not tell, which is refused too: a clean tree is what is claimed, so it has to be seen.
 */
export function dirtyTreeRefusal(program: string, root: string, uncommitted: readonly string[] | undefined, out: string, allowDirty: boolean): string | undefined {
  if (uncommitted?.length === 0) return undefined;
  const what = uncommitted === undefined ? 'cannot tell whether the working tree is clean (git status failed)' : `the working tree has uncommitted changes:\n${named(uncommitted)}`;
  if (!allowDirty) {
    return `bench:${program}: ${what}\nResults are written only from a clean tree: commit or stash the changes, or pass --allow-dirty for a development run (its report goes to ${join(DEV_RESULTS_DIR, program)}.{json,md}, marked as such).`;
  }
  if (inResultsFolder(root, out)) {
    return `bench:${program}: ${what}\n--allow-dirty does not write into bench/results/, which holds only runs of a commit: leave --out out (the report goes to ${join(DEV_RESULTS_DIR, program)}) or name a path elsewhere.`;
  }
  return undefined;
}
