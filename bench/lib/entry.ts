import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ConfigError, HelpRequested } from '../../common/config.js';

/** Writes `<out>.json` and `<out>.md` (`out` relative to the repository root, or absolute) and prints the markdown. */
export async function writeResults(repoRoot: string, out: string, json: unknown, md: string): Promise<void> {
  await writeFile(resolve(repoRoot, `${out}.json`), JSON.stringify(json, null, 2) + '\n');
  await writeFile(resolve(repoRoot, `${out}.md`), md);
  process.stdout.write(md);
}

/**
 * Runs a benchmark's main with the command line: `--help` prints, a bad flag exits 2 with its
 * message (as the modelmux CLI does), any other failure exits 1 with its stack.
 */
export async function runBenchmark(main: (argv: string[]) => Promise<void>): Promise<void> {
  try {
    await main(process.argv.slice(2));
  } catch (err) {
    if (err instanceof HelpRequested) process.stdout.write(err.text);
    else if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    }
  }
}
