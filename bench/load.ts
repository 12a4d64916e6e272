import { join } from 'node:path';
import { z } from 'zod';
import { type OptionSpecs, intString } from '../common/config.js';
import { SAMPLE_WINE } from '../common/wine-model.js';
import { loadFileMapper, type FileMapper } from '../replica/onnx/file-map.js';
import { GraphSessions } from '../replica/onnx/graph-sessions.js';
import type { ModelSession } from '../replica/onnx/model-session.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { ensureAlignedCopies, modelDirFor } from './lib/model-set.js';
import { REPLICA_TUNING } from './lib/replica-tuning.js';
import { modelIds } from './lib/traffic.js';
import { writeReport } from './lib/report.js';

/**
 * `npm run bench:load`: the replica's load path alone, in one process. The same model files (page
 * cache warm) are opened, run once and released in LRU order, with a session per model, with
 * shared-graph sessions reading each file (ADR 0016) and with shared-graph sessions mapping
 * aligned copies of the files (ADR 0021), alternating rounds. Reports CPU and wall time per load.
 * Writes bench/results/load.{json,md}.
 */

const schema = z.object({
  models: intString(2, 10_000).default(40),
  modelBytes: intString(1000, 1_000_000_000).default(5_000_000),
  keep: intString(1, 1000).default(8),
  steps: intString(1, 1_000_000).default(300),
  rounds: intString(1, 100).default(3),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  models: { flag: 'models', help: 'Model files cycled through (default 40).' },
  modelBytes: { flag: 'model-bytes', help: 'Size of each model file (default 5000000).' },
  keep: { flag: 'keep', help: 'Models kept open, like --max-models; the oldest is released at each step (default 8).' },
  steps: { flag: 'steps', help: 'Loads per variant per round (default 300).' },
  rounds: { flag: 'rounds', help: 'Alternating rounds of the two variants (default 3).' },
};

const VARIANTS = ['own_session', 'shared_graph', 'mapped'] as const;
type Variant = (typeof VARIANTS)[number];
const LABEL: Record<Variant, string> = { own_session: 'own session', shared_graph: 'shared graph, read', mapped: 'shared graph, mapped' };
interface Row {
  variant: Variant;
  round: number;
  cpuMsPerLoad: number;
  wallMsPerLoad: number;
}

async function round(variant: Variant, o: Options, path: (i: number) => string, mapper: FileMapper): Promise<{ cpu: number; wall: number }> {
  const tuning = { ...REPLICA_TUNING, shareGraphs: variant !== 'own_session' };
  const mapped = variant === 'mapped';
  const sessions = new GraphSessions('cpu', tuning, undefined, mapped ? mapper : undefined);
  const input = [{ datatype: 'FP32' as const, dims: [1, SAMPLE_WINE.length], data: Float32Array.from(SAMPLE_WINE) }];
  const open: ModelSession[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < o.steps; i++) {
    const m = await sessions.open(path(i % o.models), mapped);
    await m.run(input);
    open.push(m);
    if (open.length > o.keep) await open.shift()?.release();
  }
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  for (const m of open) await m.release();
  return { cpu: (cpu.user + cpu.system) / 1000 / o.steps, wall: wall / o.steps };
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  const ids = modelIds(o.models);
  const mapper = loadFileMapper();
  if ('unavailable' in mapper) throw new Error(`the mapped variant needs the file mapper: ${mapper.unavailable}`);
  // The mapped variant opens the copies the S3 store would have made at download: weights aligned.
  const aligned = await ensureAlignedCopies(ids, o.modelBytes);
  const path = (i: number): string => join(modelDirFor(o.modelBytes), ids[i] as string, 'model.onnx');
  const alignedPath = (i: number): string => aligned.get(ids[i] as string) as string;
  const rows: Row[] = [];
  for (let r = 1; r <= o.rounds; r++) {
    for (const variant of VARIANTS) {
      const { cpu, wall } = await round(variant, o, variant === 'mapped' ? alignedPath : path, mapper);
      rows.push({ variant, round: r, cpuMsPerLoad: cpu, wallMsPerLoad: wall });
      process.stderr.write(`[bench:load] round ${r} ${variant}: ${cpu.toFixed(2)} ms CPU, ${wall.toFixed(2)} ms wall per load\n`);
    }
  }
  const cell = (v: Variant, r: number): Row => rows.find((x) => x.variant === v && x.round === r) as Row;
  await writeReport(run, {
    title: 'Load path: a session per model vs shared-graph sessions, reading or mapping the file',
    setup: `${o.models} wine models of ${(o.modelBytes / 1e6).toFixed(1)} MB read from local disk (page cache warm; the mapped variant opens copies with their weights aligned, as the S3 store writes them), ${o.keep} kept open; each step opens the next model, runs one row and releases the oldest; ${o.steps} steps per variant per round, variants alternating; one process, sessions with the replica's default options.`,
    sections: [
      {
        headline: true,
        table: {
          header: ['round', ...VARIANTS.map((v) => `${LABEL[v]}: CPU ms / load`), 'mapped / read (CPU)', ...VARIANTS.map((v) => `${LABEL[v]}: wall ms / load`)],
          rows: Array.from({ length: o.rounds }, (_, i) => [
            String(i + 1),
            ...VARIANTS.map((v) => fmt(cell(v, i + 1).cpuMsPerLoad, 2)),
            fmt(cell('mapped', i + 1).cpuMsPerLoad / cell('shared_graph', i + 1).cpuMsPerLoad, 2),
            ...VARIANTS.map((v) => fmt(cell(v, i + 1).wallMsPerLoad, 2)),
          ]),
        },
      },
    ],
    data: { rows },
  });
}

await runBench({ name: 'load', summary: 'Replica load path: a session per model vs shared-graph sessions.', schema, specs }, main);
