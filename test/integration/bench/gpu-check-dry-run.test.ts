import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const CHECK = join(process.cwd(), 'dist/bench/gpu-check.js');

interface Snapshot {
  loads?: number;
  tierLoads?: Record<string, number | undefined>;
  evictions?: number;
  loadedBytes?: number;
}
interface Report {
  sections: { heading?: string; table?: { rows: string[][] } }[];
  data: {
    tolerance: number;
    skipped: string[];
    baseline: Snapshot;
    pastCapacity: Snapshot;
    afterReloads: Snapshot;
    unloaded: Snapshot;
    leftLoaded: number;
    phases: { requested: number; seconds: number; before: Snapshot; after: Snapshot }[];
    models: { family: string; loadMs: number; firstMs: number; warmMs: number; loadedBytes?: number }[];
    diffs: Record<string, { abs: number; rel: number }>;
  };
}

// The GPU check runs by hand on a GPU machine (bench/gpu/README.md); this dry run on the CPU
// provider keeps it working between such runs.
describe('bench:gpu-check on the CPU provider (the dry run)', () => {
  let dir: string;
  let report: Report;
  let markdown: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'modelmux-gpu-check-test-'));
    const out = join(dir, 'gpu-check');
    await run(process.execPath, [CHECK, '--provider', 'cpu', '--models', '8', '--model-bytes', '1000000', '--budget-s', '60', '--allow-dirty', '--out', out], { timeout: 90_000 });
    report = JSON.parse(await readFile(`${out}.json`, 'utf8')) as Report;
    markdown = await readFile(`${out}.md`, 'utf8');
  }, 120_000);

  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('writes every section', () => {
    expect(report.sections.map((s) => s.heading)).toEqual([
      'Loads per second by tier',
      'First run against warm runs',
      'Device bytes per model against the budget',
      'Eviction returning device memory',
      'Answers against the CPU provider',
    ]);
    expect(report.data.skipped).toEqual([]);
  });

  it('counts a load for each model, then one for each evicted model loaded again', () => {
    const [first, reloads] = report.data.phases;
    expect(first?.requested).toBe(8);
    expect((first?.after.loads ?? 0) - (first?.before.loads ?? 0)).toBe(8);
    expect(reloads?.requested).toBe(4);
    expect((reloads?.after.loads ?? 0) - (reloads?.before.loads ?? 0)).toBe(4);
    expect(first?.seconds).toBeGreaterThan(0);
  });

  it('times the load, the first run and the warm runs of every model of both families', () => {
    expect(report.data.models.map((m) => m.family).sort()).toEqual(['distinct', 'distinct', 'distinct', 'distinct', 'wine', 'wine', 'wine', 'wine']);
    for (const m of report.data.models) {
      expect(m.loadMs).toBeGreaterThan(0);
      expect(m.firstMs).toBeGreaterThan(0);
      expect(m.warmMs).toBeGreaterThan(0);
    }
  });

  it('measures what each model holds before the first eviction, and that unloading gives it all back', () => {
    const own = report.data.models.slice(0, 4).map((m) => m.loadedBytes ?? 0);
    for (const bytes of own) expect(bytes).toBeGreaterThan(0);
    expect(report.data.pastCapacity.evictions).toBeGreaterThanOrEqual(4);
    expect(report.data.unloaded.loadedBytes).toBe(0);
    expect(report.data.leftLoaded).toBe(0);
  });

  it('reloads the evicted models from host memory, not from the store', () => {
    const [first, reloads] = report.data.phases;
    const tier = (p: typeof first, t: string): number => (p?.after.tierLoads?.[t] ?? NaN) - (p?.before.tierLoads?.[t] ?? NaN);
    expect(tier(first, 'store')).toBe(8);
    expect(tier(reloads, 'host')).toBe(4);
    expect(tier(reloads, 'store')).toBe(0);
  });

  it("answers as onnxruntime on the CPU does, within the check's tolerance", () => {
    const diffs = Object.values(report.data.diffs);
    expect(diffs).toHaveLength(8);
    for (const d of diffs) expect(d.rel).toBeLessThanOrEqual(report.data.tolerance);
    expect(markdown).toContain('All within: **yes**');
  });

  it('reports each device figure as a number or as absent (a metric the replica does not expose), never n/a', () => {
    for (const section of report.sections.slice(2, 4)) {
      for (const row of section.table?.rows ?? []) for (const cell of row.slice(1)) expect(cell).toMatch(/^(absent|-?\d+(\.\d+)?)$/);
    }
    const smi = report.sections[2]?.table?.rows.find((r) => r[0]?.startsWith('nvidia-smi'));
    expect(smi).toBeDefined();
  });
});
