import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { z } from 'zod';
import { type OptionSpecs, intString } from '../common/config.js';
import { SAMPLE_WINE } from '../common/wine-model.js';
import { loadFileMapper } from '../replica/onnx/file-map.js';
import { GraphSessions, type OpenKind, type WeightSource } from '../replica/onnx/graph-sessions.js';
import type { ModelSession } from '../replica/onnx/model-session.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { alignedCopyPath, ensureAlignedCopies, modelDirFor } from './lib/model-set.js';
import { median, rotated } from './lib/stats.js';
import { REPLICA_TUNING } from './lib/replica-tuning.js';
import { modelIds } from './lib/traffic.js';
import { writeReport } from './lib/report.js';

/**
 * `npm run bench:cold`: what a run costs over weights not in the CPU's cache, in one process with
 * every model open, so nothing is loaded while it is measured. "Hot" runs one model again and
 * again (its weights stay in the cache, as under one-hot traffic); "cold" runs every model in
 * turn (as under uniform traffic over models that are all loaded). Three ways of holding the
 * weights, each in a process of its own per round: mapped from the page cache (the replica's way
 * for S3 downloads), read into the process's memory, and read into memory backed by huge pages
 * (glibc's `glibc.malloc.hugetlb=1` tunable, which asks the kernel for transparent huge pages),
 * to tell memory bandwidth from address translation. Writes bench/results/cold.{json,md}.
 */

const VARIANTS = ['mapped', 'read', 'read-huge'] as const;
type Variant = (typeof VARIANTS)[number];
const LABEL: Record<Variant, string> = { mapped: 'mapped (page cache)', read: 'read into memory', 'read-huge': 'read, huge pages' };
const HUGE_PAGES_ENV = { GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' };

const schema = z.object({
  models: intString(2, 10_000).default(200),
  modelBytes: intString(1000, 1_000_000_000).default(5_000_000),
  runs: intString(1, 1_000_000).default(2000),
  rounds: intString(1, 100).default(5),
  child: z.enum(VARIANTS).optional(),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  models: { flag: 'models', help: 'Models held open; cold runs go through all of them in turn (default 200).' },
  modelBytes: { flag: 'model-bytes', help: 'Size of each model file (default 5000000).' },
  runs: { flag: 'runs', help: 'Runs per window; each process measures two hot and two cold windows, alternating (default 2000).' },
  rounds: { flag: 'rounds', help: 'Rounds; each starts a process per variant, in an order rotated by round (default 5).' },
  child: { flag: 'child', help: 'Internal: measure this variant in this process and print the result as JSON.' },
};

/** One process's measure: CPU per run (all its threads), and the huge pages the kernel gave it. */
interface Measure {
  hotUs: number;
  coldUs: number;
  anonHugeKiB: number;
}
interface Row extends Measure {
  variant: Variant;
  round: number;
}

function anonHugeKiB(): number {
  const line = readFileSync('/proc/self/smaps_rollup', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('AnonHugePages:'));
  return Number(line?.match(/\d+/)?.[0] ?? 0);
}

async function measure(variant: Variant, o: Options): Promise<Measure> {
  const ids = modelIds(o.models);
  const mapped = variant === 'mapped';
  const mapper = loadFileMapper();
  if (mapped && 'unavailable' in mapper) throw new Error(`the mapped variant needs the file mapper: ${mapper.unavailable}`);
  let unmapped = 0;
  const onOpen = (_kind: OpenKind, weights?: WeightSource): void => {
    if (weights !== 'mapped') unmapped++;
  };
  const sessions = new GraphSessions('cpu', { ...REPLICA_TUNING, shareGraphs: true }, onOpen, mapped && !('unavailable' in mapper) ? mapper : undefined);
  const models: ModelSession[] = [];
  for (const id of ids) {
    const path = mapped ? alignedCopyPath(o.modelBytes, id) : join(modelDirFor(o.modelBytes), id, 'model.onnx');
    models.push(await sessions.open(path, mapped));
  }
  // GraphSessions reads a file it cannot map: the mapped variant would then measure reads.
  if (mapped && unmapped > 0) throw new Error(`${unmapped} of ${ids.length} models were read, not mapped`);
  const input = [{ datatype: 'FP32' as const, dims: [1, SAMPLE_WINE.length], data: Float32Array.from(SAMPLE_WINE) }];
  // One pass touches every weight once, so page faults are not counted as a cold run's cost.
  for (const m of models) await m.run(input);
  const window = async (pick: (i: number) => ModelSession): Promise<number> => {
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < o.runs; i++) await pick(i).run(input);
    const cpu = process.cpuUsage(cpu0);
    return (cpu.user + cpu.system) / o.runs;
  };
  const hot = (): ModelSession => models[0] as ModelSession;
  const cold = (i: number): ModelSession => models[i % models.length] as ModelSession;
  const hotUs: number[] = [];
  const coldUs: number[] = [];
  for (let w = 0; w < 2; w++) {
    hotUs.push(await window(hot));
    coldUs.push(await window(cold));
  }
  const result = { hotUs: median(hotUs), coldUs: median(coldUs), anonHugeKiB: anonHugeKiB() };
  for (const m of models) await m.release();
  return result;
}

const run = promisify(execFile);

async function measureInChild(variant: Variant, o: Options): Promise<Measure> {
  const args = [fileURLToPath(import.meta.url), '--child', variant, '--models', String(o.models), '--model-bytes', String(o.modelBytes), '--runs', String(o.runs)];
  const env = variant === 'read-huge' ? { ...process.env, ...HUGE_PAGES_ENV } : process.env;
  const { stdout } = await run(process.execPath, args, { env, maxBuffer: 1 << 20 });
  return JSON.parse(stdout.trim().split('\n').pop() as string) as Measure;
}

function thpMode(): string {
  try {
    return readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

async function main(bench: BenchRun<Options>): Promise<void> {
  const o = bench.options;
  if (o.child) {
    process.stdout.write(`${JSON.stringify(await measure(o.child, o))}\n`);
    return;
  }
  await ensureAlignedCopies(modelIds(o.models), o.modelBytes);
  const rows: Row[] = [];
  for (let r = 1; r <= o.rounds; r++) {
    for (const variant of rotated(VARIANTS, r - 1)) {
      const row = { variant, round: r, ...(await measureInChild(variant, o)) };
      rows.push(row);
      process.stderr.write(`[bench:cold] round ${r} ${variant}: hot ${row.hotUs.toFixed(0)} µs, cold ${row.coldUs.toFixed(0)} µs CPU per run; huge pages ${(row.anonHugeKiB / 1024).toFixed(0)} MiB\n`);
    }
  }
  const huge = rows.filter((x) => x.variant === 'read-huge');
  if (huge.some((x) => x.anonHugeKiB === 0)) {
    process.stderr.write(`[bench:cold] WARNING: the kernel gave the huge-page variant no huge pages in some rounds (transparent_hugepage: ${thpMode()}); that column then measures 4 kB pages\n`);
  }
  const of = (v: Variant): Row[] => rows.filter((x) => x.variant === v);
  const gap = (x: Row): number => x.coldUs - x.hotUs;
  await writeReport(bench, {
    title: 'A run over weights in the CPU cache against one over weights in memory',
    setup: `${o.models} wine models of ${(o.modelBytes / 1e6).toFixed(1)} MB, all open in one process through the replica's shared-graph sessions (one row per run). Hot: ${o.runs} runs of one model; cold: ${o.runs} runs going through every model in turn. Two windows of each, alternating, after one run of every model; CPU per run of the whole process, median of its two windows. Each variant in a process of its own per round, the order rotated by round. Transparent huge pages: ${thpMode()}.`,
    sections: [
      {
        headline: true,
        table: {
          header: ['variant', 'hot µs / run', 'cold µs / run', 'cold − hot, µs (by round)', 'cold / hot', 'huge pages, MiB'],
          rows: VARIANTS.map((v) => [
            LABEL[v],
            fmt(median(of(v).map((x) => x.hotUs)), 0),
            fmt(median(of(v).map((x) => x.coldUs)), 0),
            `${fmt(median(of(v).map(gap)), 0)} (${of(v)
              .map((x) => fmt(gap(x), 0))
              .join(', ')})`,
            fmt(median(of(v).map((x) => x.coldUs / x.hotUs)), 2),
            fmt(median(of(v).map((x) => x.anonHugeKiB / 1024)), 0),
          ]),
        },
      },
    ],
    data: { transparentHugePages: thpMode(), rows },
  });
}

await runBench({ name: 'cold', summary: 'A run over weights in the CPU cache against one over weights in memory.', schema, specs }, main);
