import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { ConfigError, HelpRequested, intString } from '../../common/config.js';
import { benchCommand, parseBenchOptions, type BenchRun } from './cli-options.js';
import { REPORT_FORMAT, reportFile, reportMarkdown } from './report.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.

const program = {
  name: 'demo',
  summary: 'A demonstration.',
  schema: z.object({ rounds: intString(1, 10).default(3) }),
  specs: { rounds: { flag: 'rounds', help: 'Rounds (default 3).' } },
};

describe('the bench option parser', () => {
  it('gives the typed options, --out defaulting to bench/results/<name>, and the command that reproduces the run', () => {
    const run = parseBenchOptions(program, ['--rounds', '5'], {});
    assert.deepEqual(run.options, { rounds: 5 });
    assert.equal(run.out, 'bench/results/demo');
    assert.equal(run.command, 'npm run bench:demo -- --rounds 5');
    assert.equal(parseBenchOptions(program, ['--out', '/tmp/x'], {}).out, '/tmp/x');
  });

  it('prints help with the npm command and --out, and reports every bad flag at once', () => {
    assert.throws(
      () => parseBenchOptions(program, ['--help'], {}),
      (e: unknown) => e instanceof HelpRequested && e.text.startsWith('usage: npm run bench:demo -- [flags]\n') && e.text.includes('--out') && e.text.includes('--rounds'),
    );
    assert.throws(
      () => parseBenchOptions(program, ['--rounds', '0', '--bogus'], {}),
      (e: unknown) => e instanceof ConfigError && e.problems.length === 2,
    );
  });

  it('quotes the arguments a shell would split', () => {
    assert.equal(benchCommand('demo', []), 'npm run bench:demo');
    assert.equal(benchCommand('demo', ['--b', "/tmp/a b/it's"]), `npm run bench:demo -- --b '/tmp/a b/it'\\''s'`);
  });
});

describe('the report writer', () => {
  const run: BenchRun<{ rounds: number }> = {
    program: 'demo',
    options: { rounds: 3 },
    out: 'bench/results/demo',
    command: 'npm run bench:demo',
    machine: { date: '2026-12-05T01:00:00.000Z', nproc: 2, memoryGiB: 23.5, cpuModel: 'Xeon', node: 'v26.12.1', kernel: '6.18', gitCommit: 'abc1234', uncommitted: [], loadAverage1m: 0.5 },
  };
  const file = reportFile(run, { title: 'Demo', setup: 'One round.', sections: [{ heading: 'Part', table: { header: ['a', 'b'], rows: [['1', '2']] }, after: 'Done.', headline: true }], data: { x: 1 } }, new Date('2026-12-05T01:00:30.000Z'));

  it('keeps the command, machine, date, commit, options and tables in the JSON', () => {
    assert.equal(file.format, REPORT_FORMAT);
    assert.equal(file.program, 'demo');
    assert.equal(file.gitCommit, 'abc1234');
    assert.equal(file.date, run.machine.date);
    assert.equal(file.wallSeconds, 30);
    assert.deepEqual(file.options, { rounds: 3 });
    assert.deepEqual(file.sections[0]?.table, { header: ['a', 'b'], rows: [['1', '2']] });
  });

  it('renders the same in Markdown: title, command, machine, setup, then each section', () => {
    const md = reportMarkdown(file);
    assert.equal(
      md,
      [
        '## Demo',
        'Command: `npm run bench:demo`',
        'Machine: 2026-12-05T01:00:00.000Z · 2 cores (Xeon) · 23.5 GiB · Linux 6.18 · Node v26.12.1 · commit abc1234 · load average 0.5 at start; ran 30 s',
        'One round.',
        '### Part\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nDone.',
      ].join('\n\n') + '\n',
    );
  });
});
