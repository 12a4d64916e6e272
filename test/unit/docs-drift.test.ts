import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { Registry } from 'prom-client';
import { ERROR_CATALOGUE } from '../../common/errors.js';
import { createOperatorMetrics } from '../../operator/metrics.js';
import { createReplicaMetrics } from '../../replica/metrics.js';
import { RouterMetrics } from '../../router/metrics.js';

const run = promisify(execFile);

async function metricNames(registry: Registry): Promise<string[]> {
  return (await registry.getMetricsAsJSON()).map((m) => m.name);
}

describe('the documentation', () => {
  it('lists every modelmux metric of the replica, the router and the operator in docs/metrics.md', async () => {
    const page = await readFile('docs/metrics.md', 'utf8');
    const names = [
      ...(await metricNames(createReplicaMetrics().registry)),
      ...(await metricNames(new RouterMetrics().registry)),
      // The operator's default process metrics are covered by one sentence, not listed.
      ...(await metricNames(createOperatorMetrics().registry)).filter((n) => !/^modelmux_operator_(process|nodejs)_/.test(n)),
    ];
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((n) => !page.includes(`\`${n}\``))).toEqual([]);
  });

  it('gives every error code a row in the troubleshooting table', async () => {
    const page = await readFile('docs/troubleshooting.md', 'utf8');
    const missing = Object.entries(ERROR_CATALOGUE).filter(([code, e]) => !page.includes(`| \`${code}\` | ${e.status} |`));
    expect(missing.map(([code]) => code)).toEqual([]);
  });

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
