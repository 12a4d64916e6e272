import { z } from 'zod';
import { intString, type OptionSpecs } from '../common/config.js';
import { systemClock } from '../common/clock.js';
import { createLogger } from '../common/log.js';
import { logOptionSpecs, logOptionsShape } from '../common/log-options.js';
import type { ModelId } from '../common/model-id.js';
import { SAMPLE_WINE, WINE_INPUT } from '../common/wine-model.js';
import { loadFileMapper, type FileMapper } from '../replica/onnx/file-map.js';
import { IdleMappings } from '../replica/onnx/idle-mappings.js';
import { createReplicaMetrics } from '../replica/metrics.js';
import type { LocalModelFile, ModelStore } from '../replica/store/model-store.js';
import { parseReplicaConfig } from '../replica/config.js';
import { ReplicaService, serviceTuning } from '../replica/serving/replica-service.js';
import { commaList, slotList } from './lib/comma-list.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { writeReport, type ReportSection } from './lib/report.js';
import { ensureAlignedCopies } from './lib/model-set.js';
import { mean, median, rotated } from './lib/stats.js';
import { idSampler, modelIds, PATTERNS, type PatternName } from './lib/traffic.js';

/**
 * `npm run bench:serve`: one replica's serving path (cache, loads, onnxruntime) in one process,
 * without HTTP, a router or other processes on the CPU: CPU per request under each traffic
 * pattern, with few slots (loads) and with a slot for every model (no loads after the first).
 * It splits bench:mux's spread across patterns into what the loads cost and what running a
 * model whose weights are not in the CPU's cache costs, measured apart from the machine's noise.
 * Then one request at a time, the fewest and the most slots' services taking turns on the same
 * uniform sequence: the CPU of each request on its own, so a load's cost in the serving path is
 * the difference of two means taken over the same seconds, not of two windows minutes apart.
 * Writes bench/results/serve.{json,md}.
 */

const schema = z.object({
  // One replica's share of bench:mux's 200 models over 2 replicas.
  models: intString(2, 10_000).default(100),
  modelBytes: intString(1000, 1_000_000_000).default(5_000_000),
  slots: slotList('8,100'),
  patterns: z.string().default(PATTERNS.join(',')),
  concurrency: intString(1, 1000).default(8),
  seconds: z.coerce.number().min(0.5).max(600).default(4),
  rounds: intString(1, 20).default(3),
  seed: intString(0, 2 ** 31).default(42),
  alternatingSeconds: z.coerce.number().min(0).max(600).default(10),
  ...logOptionsShape,
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  models: { flag: 'models', help: "Models the replica is asked for (default 100: one replica's share in bench:mux)." },
  modelBytes: { flag: 'model-bytes', help: 'Size of each model file (default 5000000).' },
  slots: { flag: 'slots', help: 'Comma list of --max-models values to measure (default 8,100).' },
  patterns: { flag: 'patterns', help: `Comma list of ${PATTERNS.join(', ')} (default all).` },
  concurrency: { flag: 'concurrency', help: 'Requests in flight, as the router keeps on a replica (default 8).' },
  seconds: { flag: 'seconds', help: 'Measured seconds per pattern per slot count per round (default 4).' },
  rounds: { flag: 'rounds', help: 'Rounds, patterns in a rotated order each round (default 3).' },
  seed: { flag: 'seed', help: 'Seed of the model sequences (default 42).' },
  alternatingSeconds: { flag: 'alternating-seconds', help: 'Seconds of uniform traffic one request at a time, the fewest and most slots taking turns; 0 skips it (default 10).' },
  ...logOptionSpecs,
};

interface Row {
  slots: number;
  pattern: PatternName;
  round: number;
  requests: number;
  cpuUsPerRequest: number;
  loadsPer1000: number;
}

/** The model files as the S3 store leaves them after a download, with nothing to fetch: private, so mapped. */
class LocalCopies implements ModelStore {
  readonly uri = 'file://bench-aligned-copies';
  constructor(private readonly paths: ReadonlyMap<string, string>) {}
  fetch(id: ModelId): Promise<LocalModelFile> {
    const path = this.paths.get(id);
    if (path === undefined) return Promise.reject(new Error(`no copy of ${id}`));
    return Promise.resolve({ path, bytes: 0, private: true });
  }
}

const counterValue = async (c: { get(): Promise<{ values: { value: number }[] }> }): Promise<number> => (await c.get()).values.reduce((n, v) => n + v.value, 0);

const body = { inputs: [{ name: WINE_INPUT, shape: [1, SAMPLE_WINE.length], datatype: 'FP32', data: [...SAMPLE_WINE] }] };
const none = new Uint8Array(0);

/** A replica's service with every model asked for once: what follows starts in its steady state. */
async function warmService(o: Options, slots: number, store: ModelStore, mapper: FileMapper, ids: readonly ModelId[]) {
  const metrics = createReplicaMetrics();
  // The replica's own defaults, from its own parser: only the slots are the benchmark's.
  const config = parseReplicaConfig(['--model-source', 's3://bench/models', '--max-models', String(slots)], {});
  const service = new ReplicaService({
    ...serviceTuning(config),
    store,
    mapper: new IdleMappings(mapper, config.diskCacheBytes, () => undefined),
    clock: systemClock,
    // The replica's log lines are built as in production, then dropped: this process's stdout is the report.
    log: createLogger({ component: 'replica' }, () => undefined, o.logLevel),
    metrics,
    onTableChange: () => undefined,
  });
  for (const id of ids) await service.infer(id, body, none);
  return { service, metrics };
}

async function measure(o: Options, slots: number, pattern: PatternName, round: number, store: ModelStore, mapper: FileMapper, ids: readonly ModelId[]): Promise<Row> {
  const { service, metrics } = await warmService(o, slots, store, mapper, ids);
  try {
    // A second of the pattern before the measured window.
    const next = idSampler(pattern, ids, o.seed + round) as () => ModelId;
    const drive = async (seconds: number): Promise<number> => {
      const until = performance.now() + seconds * 1000;
      let n = 0;
      await Promise.all(
        Array.from({ length: o.concurrency }, async () => {
          while (performance.now() < until) {
            await service.infer(next(), body, none);
            n++;
          }
        }),
      );
      return n;
    };
    await drive(1);
    const loads0 = await counterValue(metrics.loads);
    const cpu0 = process.cpuUsage();
    const requests = await drive(o.seconds);
    const cpu = process.cpuUsage(cpu0);
    const loads = (await counterValue(metrics.loads)) - loads0;
    return { slots, pattern, round, requests, cpuUsPerRequest: (cpu.user + cpu.system) / requests, loadsPer1000: (1000 * loads) / requests };
  } finally {
    await service.close();
  }
}

interface Alternating {
  slots: number;
  requests: number;
  loadsPer1000: number;
  cpuUsPerRequest: number;
  /** Mean CPU of a request whose model was loaded, and of one that waited for its load; NaN when none. */
  hitCpuUs: number;
  missCpuUs: number;
}

/**
 * Uniform traffic one request at a time, the services of `slotCounts` taking turns on one
 * sequence: nothing else runs during a request, so its CPU is its own, and every service is
 * measured over the same seconds, so the machine's phases fall on all of them alike.
 */
async function alternating(o: Options, slotCounts: readonly number[], store: ModelStore, mapper: FileMapper, ids: readonly ModelId[]): Promise<Alternating[]> {
  const services: ReplicaService[] = [];
  try {
    for (const slots of slotCounts) services.push((await warmService(o, slots, store, mapper, ids)).service);
    const next = idSampler('uniform', ids, o.seed) as () => ModelId;
    const samples = slotCounts.map(() => ({ hit: [] as number[], miss: [] as number[] }));
    const drive = async (seconds: number, record: boolean): Promise<void> => {
      const until = performance.now() + seconds * 1000;
      for (let i = 0; performance.now() < until; i++) {
        const k = i % services.length;
        const id = next();
        const cpu0 = process.cpuUsage();
        const { hit } = await (services[k] as ReplicaService).infer(id, body, none);
        const cpu = process.cpuUsage(cpu0);
        if (record) samples[k]?.[hit ? 'hit' : 'miss'].push(cpu.user + cpu.system);
      }
    };
    await drive(1, false);
    await drive(o.alternatingSeconds, true);
    return slotCounts.map((slots, k) => {
      const { hit, miss } = samples[k] ?? { hit: [], miss: [] };
      const all = [...hit, ...miss];
      return { slots, requests: all.length, loadsPer1000: (1000 * miss.length) / all.length, cpuUsPerRequest: mean(all), hitCpuUs: mean(hit), missCpuUs: mean(miss) };
    });
  } finally {
    await Promise.all(services.map((s) => s.close()));
  }
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  const patterns = commaList('bench:serve', o.patterns, PATTERNS, 'pattern');
  const mapper = loadFileMapper();
  if ('unavailable' in mapper) throw new Error(`bench:serve maps models as a replica does and needs the file mapper: ${mapper.unavailable}`);
  const ids = modelIds(o.models) as ModelId[];
  const store = new LocalCopies(await ensureAlignedCopies(ids, o.modelBytes));
  const rows: Row[] = [];
  for (let round = 1; round <= o.rounds; round++) {
    for (const slots of o.slots) {
      for (const pattern of rotated(patterns, round - 1)) {
        const row = await measure(o, slots, pattern, round, store, mapper, ids);
        rows.push(row);
        process.stderr.write(`[bench:serve] round ${round}, ${slots} slots, ${pattern}: ${row.cpuUsPerRequest.toFixed(0)} µs CPU per request, ${row.loadsPer1000.toFixed(0)} loads per 1000\n`);
      }
    }
  }

  const med = (slots: number, p: PatternName, key: 'cpuUsPerRequest' | 'loadsPer1000'): number => median(rows.filter((r) => r.slots === slots && r.pattern === p).map((r) => r[key]));
  // Throughput on a CPU-bound machine is 1 / CPU per request: the spread is the cheapest pattern's CPU over the dearest's.
  const spread = (slots: number): number => 1 - Math.min(...patterns.map((p) => med(slots, p, 'cpuUsPerRequest'))) / Math.max(...patterns.map((p) => med(slots, p, 'cpuUsPerRequest')));
  const fewest = Math.min(...o.slots);
  const most = Math.max(...o.slots);
  const loadsAdded = (p: PatternName): number => (med(fewest, p, 'loadsPer1000') - med(most, p, 'loadsPer1000')) / 1000;
  // Per load only where loads make up most of the difference: a few hundred loads per 1000 leave it within the noise.
  const churned = patterns.reduce((a, b) => (loadsAdded(b) > loadsAdded(a) ? b : a));
  const perLoad = (med(fewest, churned, 'cpuUsPerRequest') - med(most, churned, 'cpuUsPerRequest')) / loadsAdded(churned);
  const alt = o.alternatingSeconds > 0 && o.slots.length > 1 ? await alternating(o, [fewest, most], store, mapper, ids) : [];
  for (const a of alt) process.stderr.write(`[bench:serve] one at a time, ${a.slots} slots: ${a.cpuUsPerRequest.toFixed(0)} µs CPU per request, ${a.loadsPer1000.toFixed(0)} loads per 1000\n`);
  const [altFew, altMost] = alt;
  const sections: ReportSection[] = [
    {
      headline: true,
      table: {
        header: ['slots (--max-models)', ...patterns.map((p) => `${p}: CPU µs / request`), ...patterns.map((p) => `${p}: loads / 1000`), 'spread (1 − cheapest / dearest)'],
        rows: o.slots.map((s) => [String(s), ...patterns.map((p) => fmt(med(s, p, 'cpuUsPerRequest'), 0)), ...patterns.map((p) => fmt(med(s, p, 'loadsPer1000'), 0)), `${fmt(100 * spread(s), 1)}%`]),
      },
      ...(o.slots.length > 1 && loadsAdded(churned) > 0
        ? {
            after: `CPU per load, ${churned} traffic (the most loads added): ${fmt(perLoad, 0)} µs (${fewest} slots against ${most}, by the difference in CPU per request over the difference in loads).`,
          }
        : {}),
    },
    {
      table: {
        header: ['round', 'slots', ...patterns.map((p) => `${p}: CPU µs / request`)],
        rows: rows
          .filter((r) => r.pattern === patterns[0])
          .map((r) => [String(r.round), String(r.slots), ...patterns.map((p) => fmt(rows.find((x) => x.round === r.round && x.slots === r.slots && x.pattern === p)?.cpuUsPerRequest, 0))]),
      },
    },
  ];
  if (altFew && altMost) {
    sections.push({
      heading: `One request at a time, ${fewest} and ${most} slots taking turns (uniform, ${o.alternatingSeconds} s)`,
      table: {
        header: ['slots', 'requests', 'loads / 1000', 'CPU µs / request', 'model loaded: CPU µs / request', 'waited for its load: CPU µs / request'],
        rows: alt.map((a) => [String(a.slots), String(a.requests), fmt(a.loadsPer1000, 0), fmt(a.cpuUsPerRequest, 0), fmt(a.hitCpuUs, 0), fmt(a.missCpuUs, 0)]),
      },
      after: `A load in the serving path, one request at a time: ${fmt(altFew.missCpuUs - altMost.hitCpuUs, 0)} µs of CPU (a request that waited for its load with ${fewest} slots, less one whose model was loaded with ${most}; the weights are out of the CPU's cache in both).`,
    });
  }
  await writeReport(run, {
    title: "One replica's serving path by traffic pattern, with and without loads",
    setup: `one process, one ReplicaService as \`modelmux replica\` builds it (frequency policy, shared graphs, mapped weights, idle mappings, log lines at level ${o.logLevel} built and dropped), no HTTP; ${o.models} wine models of ${(o.modelBytes / 1e6).toFixed(1)} MB, aligned copies on local disk (page cache warm) as the S3 store leaves them; ${o.concurrency} requests in flight; per cell every model once, 1 s of the pattern, then ${o.seconds} s measured; ${o.rounds} rounds, patterns rotated each round; medians over rounds.`,
    sections,
    data: { rows, alternating: alt },
  });
}

await runBench({ name: 'serve', summary: "One replica's serving path by traffic pattern, with and without loads.", schema, specs }, main);
