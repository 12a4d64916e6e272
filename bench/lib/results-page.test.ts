import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { REPORT_FORMAT, type ReportFile } from './report.js';
import { readReport, resultsPage } from './results-page.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.

const file: ReportFile = {
  format: REPORT_FORMAT,
  program: 'demo',
  title: 'Demo',
  command: 'npm run bench:demo -- --rounds 2',
  date: '2026-12-05T01:00:00.000Z',
  gitCommit: 'abc1234',
  machine: { date: '2026-12-05T01:00:00.000Z', nproc: 2, memoryGiB: 23.5, cpuModel: 'Xeon', node: 'v26.12.1', kernel: '6.18', gitCommit: 'abc1234', uncommitted: [], loadAverage1m: 3 },
  options: {},
  wallSeconds: 10,
  setup: 'Setup.',
  sections: [
    { heading: 'Every round', table: { header: ['round'], rows: [['1'], ['2']] } },
    { heading: 'Headline', table: { header: ['ratio'], rows: [['1.5']] }, headline: true },
  ],
  data: {},
};

describe('the results page', () => {
  const programs = [
    { name: 'demo', measures: 'What demo measures.' },
    { name: 'other', measures: 'What other measures.' },
  ];
  const page = resultsPage('# Results\n\nHeader.\n', programs, (name) => (name === 'demo' ? file : undefined));

  it('puts the hand-written header first, then each benchmark with its command and machine', () => {
    assert.ok(page.startsWith('# Results\n\nHeader.\n\n## `npm run bench:demo`\n\nWhat demo measures. Last run: `npm run bench:demo -- --rounds 2`; '));
    assert.ok(page.includes('commit abc1234 · load average 3 at start'));
    assert.ok(page.includes('[results/demo.md](results/demo.md)'));
  });

  it('shows only the headline sections of a report', () => {
    assert.ok(page.includes('### Headline\n\n| ratio |'));
    assert.ok(!page.includes('Every round'));
  });

  it('says how to run a benchmark that has no report in this format, rather than keep old text', () => {
    assert.ok(page.includes('## `npm run bench:other`\n\nWhat other measures.\n\nNot yet run in this format: `npm run bench:other`.'));
  });

  it("says a benchmark's own words while it has no report", () => {
    const waiting = resultsPage('# Results\n', [{ name: 'gpu', measures: 'What gpu measures.', notRun: 'Has not run on a GPU yet.' }], () => undefined);
    assert.ok(waiting.includes('## `npm run bench:gpu`\n\nWhat gpu measures.\n\nHas not run on a GPU yet.'));
    assert.ok(!waiting.includes('Not yet run in this format'));
  });

  it('reads a report file in this format and passes over older ones', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-results-'));
    writeFileSync(join(dir, 'new.json'), JSON.stringify(file));
    writeFileSync(join(dir, 'old.json'), JSON.stringify({ machine: {}, command: 'npm run bench:old', rows: [] }));
    assert.equal(readReport(dir, 'new')?.title, 'Demo');
    assert.equal(readReport(dir, 'old'), undefined);
    assert.equal(readReport(dir, 'missing'), undefined);
  });
});
