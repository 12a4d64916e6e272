import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { ConfigError, HelpRequested, intString } from '../../common/config.js';
import { DEV_RESULTS_DIR, dirtyTreeRefusal } from './clean-tree.js';
import { benchCommand, parseBenchOptions, type BenchRun } from './cli-options.js';
import { DEVELOPMENT_RUN, REPORT_FORMAT, reportFile, reportMarkdown } from './report.js';

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
    assert.equal(run.allowDirty, false);
  });

  it('sends a development run (--allow-dirty) outside the checkout unless --out says where', () => {
    const dev = parseBenchOptions(program, ['--allow-dirty'], {});
    assert.equal(dev.allowDirty, true);
    assert.equal(dev.out, `${DEV_RESULTS_DIR}/demo`);
    assert.equal(parseBenchOptions(program, ['--allow-dirty', '--out', '/tmp/x'], {}).out, '/tmp/x');
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

describe('the clean-tree rule', () => {
  const root = '/src/modelmux';
  const changed = Array.from({ length: 12 }, (_, i) => `router/f${i}.ts`);

  it('lets a run of a clean tree write anywhere', () => {
    assert.equal(dirtyTreeRefusal('demo', root, [], 'bench/results/demo', false), undefined);
    assert.equal(dirtyTreeRefusal('demo', root, [], '/tmp/x', false), undefined);
  });

  it('refuses a dirty tree, naming the changed files and the way out', () => {
    const why = dirtyTreeRefusal('demo', root, changed, 'bench/results/demo', false) ?? '';
    assert.match(why, /^bench:demo: the working tree has uncommitted changes:\n {2}router\/f0\.ts\n/);
    assert.ok(why.includes('  router/f9.ts\n  … and 2 more\n'));
    assert.ok(why.includes('--allow-dirty'));
    // Even where the report would not land in bench/results: the flag is the only way.
    assert.ok(dirtyTreeRefusal('demo', root, changed, '/tmp/x', false) !== undefined);
    assert.match(dirtyTreeRefusal('demo', root, undefined, 'bench/results/demo', false) ?? '', /cannot tell whether the working tree is clean/);
  });

  it('lets a development run write only outside bench/results', () => {
    assert.equal(dirtyTreeRefusal('demo', root, changed, `${DEV_RESULTS_DIR}/demo`, true), undefined);
    assert.equal(dirtyTreeRefusal('demo', root, changed, 'bench/results-mine/demo', true), undefined);
    assert.match(dirtyTreeRefusal('demo', root, changed, 'bench/results/demo', true) ?? '', /does not write into bench\/results/);
    assert.match(dirtyTreeRefusal('demo', root, changed, `${root}/bench/results/sub/demo`, true) ?? '', /does not write into bench\/results/);
  });
});

describe('the report writer', () => {
  const run: BenchRun<{ rounds: number }> = {
    program: 'demo',
    options: { rounds: 3 },
    out: 'bench/results/demo',
    allowDirty: false,
    command: 'npm run bench:demo',
    machine: { date: '2026-12-05T01:00:00.000Z', nproc: 2, memoryGiB: 23.5, cpuModel: 'Xeon', node: 'v26.12.1', kernel: '6.18', gitCommit: 'abc1234', uncommitted: [], loadAverage1m: 0.5 },
  };
  const file = reportFile(
    run,
    { title: 'Demo', setup: 'One round.', sections: [{ heading: 'Part', table: { header: ['a', 'b'], rows: [['1', '2']] }, after: 'Done.', headline: true }], data: { x: 1 } },
    new Date('2026-12-05T01:00:30.000Z'),
  );

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

  it('says first that a report of uncommitted code is a development run', () => {
    const dev = reportMarkdown({ ...file, machine: { ...file.machine, uncommitted: ['router/a.ts'] } });
    assert.ok(dev.startsWith(`## Demo\n\n${DEVELOPMENT_RUN}\n\nCommand:`));
    assert.ok(!reportMarkdown(file).includes(DEVELOPMENT_RUN));
  });
});
