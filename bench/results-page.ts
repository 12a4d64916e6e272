import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_LINES, PROGRAMS, readReport, resultsPage } from './lib/results-page.js';
import { repoRoot } from './lib/report.js';

/**
 * `npm run bench:results`: rebuilds bench/RESULTS.md from bench/results-header.md (by hand: the
 * targets and how to reproduce) and the newest report of each benchmark in bench/results/.
 */
function main(): void {
  const root = repoRoot();
  const header = readFileSync(join(root, 'bench/results-header.md'), 'utf8');
  // A benchmark added later (bench/<name>.ts) appears once it exists.
  const present = PROGRAMS.filter((p) => existsSync(join(root, 'bench', p.name === 'sim' ? 'simulator/main.ts' : `${p.name}.ts`)));
  const page = resultsPage(header, present, (name) => readReport(join(root, 'bench/results'), name));
  writeFileSync(join(root, 'bench/RESULTS.md'), page);
  const lines = page.split('\n').length - 1;
  process.stdout.write(`bench/RESULTS.md: ${lines} lines\n`);
  if (lines > MAX_LINES) {
    process.stderr.write(`bench/RESULTS.md has ${lines} lines, more than ${MAX_LINES}: mark fewer sections headline in the longest reports\n`);
    process.exitCode = 1;
  }
}

main();
