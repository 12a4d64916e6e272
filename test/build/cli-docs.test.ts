import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

// The build tier: this reads the flags from the built CLI (`npm run build`), where they are declared once.
describe('the documentation of the built CLI', () => {
  it('documents every flag of every subcommand in docs/cli.md', async () => {
    // Regenerate the page from `node dist/cli/main.js <command> --help` when this fails.
    const page = await readFile('docs/cli.md', 'utf8');
    const localPage = await readFile('docs/local-mode.md', 'utf8');
    const missing: string[] = [];
    for (const command of ['local', 'models', 'replica', 'router', 'operator']) {
      const { stdout } = await run(process.execPath, ['dist/cli/main.js', command, '--help']);
      const flags = [...stdout.matchAll(/^ {2}(--[a-z0-9-]+)/gm)].map((m) => m[1] ?? '');
      expect(flags.length).toBeGreaterThan(1);
      const section = page.split(`## modelmux ${command}\n`)[1]?.split('\n## ')[0] ?? '';
      missing.push(...flags.filter((f) => !section.includes(`  ${f}`)).map((f) => `${command} ${f}`));
      // docs/local-mode.md's table of local-mode flags is hand-written: it must not fall behind either.
      if (command === 'local') missing.push(...flags.filter((f) => !localPage.includes(`\`${f}\``)).map((f) => `docs/local-mode.md ${f}`));
    }
    expect(missing).toEqual([]);
  }, 60_000);
});
