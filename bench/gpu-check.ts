import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { ConfigError, intString, type OptionSpecs } from '../common/config.js';
import { EXECUTION_PROVIDERS } from '../common/resource.js';
import { startChild } from './lib/child.js';
import { inResultsFolder } from './lib/clean-tree.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { checkInput, checkStore, cpuAnswer, ROWS, type CheckModel } from './lib/gpu-check-models.js';
import { checkSections, difference, TOLERANCE, type ModelRow, type PhaseRow } from './lib/gpu-check-report.js';
import { fmt } from './lib/markdown.js';
import { gpuLine } from './lib/nvidia-smi.js';
import { Replica } from './lib/replica-client.js';
import { delta, type Snapshot } from './lib/replica-snapshot.js';
import { repoRoot, writeReport } from './lib/report.js';
import { median } from './lib/stats.js';

/**
 * `npm run bench:gpu-check`: a replica process on `--execution-provider cuda` over a file store of
 * many models, read from outside (its /metrics, nvidia-smi): loads per second by tier, the first
 * run after a load against warm runs, device bytes per model against the budget, device memory
 * given back by eviction, and answers against onnxruntime on the CPU in this process. On a GPU
 * machine by hand (bench/gpu/README.md: the device machines have no network, so it travels in
 * parts); `--provider cpu` is the dry run CI runs (test/integration/gpu-check-dry-run.test.ts),
 * so the program cannot rot between GPU runs. Bounded by `--budget-s`: a step not begun by then
 * is skipped and the report says so.
 */

/** Kept for the report and the unloads after the measured steps. */
const RESERVE_MS = 20_000;
/** Room for every model of a 64-model check of 8 MB models in host memory, evicted ones included. */
const HOST_TIER_BYTES = 4 * 1024 ** 3;

const schema = z.object({
  provider: z.enum(EXECUTION_PROVIDERS).default('cuda'),
  models: intString(2, 2000).default(64),
  modelBytes: intString(1000, 500_000_000).default(8_000_000),
  warmRuns: intString(1, 1000).default(5),
  budgetS: intString(10, 3600).default(360),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  provider: { flag: 'provider', help: "The replica's --execution-provider: cuda (default) or cpu, the dry run (never written to bench/results/)." },
  models: { flag: 'models', help: 'Models in the store, half wine MLPs (one shared graph), half distinct graphs; the replica holds half of them (default 64).' },
  modelBytes: { flag: 'model-bytes', help: "Size of each wine model's file (default 8000000)." },
  warmRuns: { flag: 'warm-runs', help: 'Runs of each model after its first, for the warm latency (default 5).' },
  budgetS: { flag: 'budget-s', help: 'Seconds the whole check may take; steps not begun in time are skipped and reported (default 360).' },
};

async function main(bench: BenchRun<Options>): Promise<void> {
  const o = bench.options;
  if (o.provider === 'cpu' && inResultsFolder(repoRoot(), bench.out)) {
    throw new ConfigError('bench:gpu-check', ['--provider cpu is the dry run, and bench/results/ holds GPU runs only: pass --allow-dirty, or --out elsewhere']);
  }
  const deadline = Date.now() + o.budgetS * 1000 - RESERVE_MS;
  const inTime = (): boolean => Date.now() < deadline;
  const log = (msg: string): void => void process.stderr.write(`[bench:gpu-check] ${msg}\n`);
  const skipped: string[] = [];

  const store = await checkStore(o.models, o.modelBytes);
  const capacity = Math.ceil(o.models / 2);
  // LRU, not the default frequency policy, which would turn newcomers away past capacity and
  // load them again for each request: each model here is loaded once, and evicts the oldest.
  const args = [join(repoRoot(), 'dist/cli/main.js'), 'replica', '--host', '127.0.0.1', '--port', '0', '--grpc-port', '-1', '--cache-policy', 'lru'];
  args.push('--model-source', pathToFileURL(store.dir).href, '--max-models', String(capacity), '--execution-provider', o.provider, '--revalidate-loaded-ms', '0');
  // Evicted models wait in host memory, so the reloads show the host tier's load rate (ADR 0047).
  args.push('--host-tier-bytes', String(HOST_TIER_BYTES));
  const started = performance.now();
  const child = await startChild(process.execPath, args, { ready: /"event":"listening"[^\n]*"port":(\d+)/, readyTimeoutMs: 120_000 });
  const startSeconds = (performance.now() - started) / 1000;
  const replica = new Replica(child);
  const input = checkInput();
  const rows: ModelRow[] = [];
  const phases: PhaseRow[] = [];
  try {
    const baseline = await replica.snapshot();
    let atCapacity: Snapshot | undefined;
    log(`replica on ${o.provider} started in ${startSeconds.toFixed(1)} s; ${o.models} models, room for ${capacity}`);

    // First loads: each model loaded, run once, then run warm. Past `capacity` every load evicts.
    let phaseStart = performance.now();
    for (const model of store.models) {
      if (!inTime()) break;
      const before = await replica.snapshot();
      const load = await replica.post(`/v2/repository/models/${model.id}/load`);
      const first = await replica.infer(model.id, input);
      const warm: number[] = [];
      for (let r = 0; r < o.warmRuns; r++) warm.push((await replica.infer(model.id, input)).ms);
      const after = await replica.snapshot();
      const evicted = delta(before.evictions, after.evictions) !== 0;
      const own = (k: 'deviceUsed' | 'smiBytes' | 'loadedBytes'): number | undefined => (evicted ? undefined : delta(before[k], after[k]));
      rows.push({
        ...model,
        loadMs: load.ms,
        firstMs: first.ms,
        warmMs: median(warm),
        deviceGauge: own('deviceUsed'),
        deviceSmi: own('smiBytes'),
        loadedBytes: own('loadedBytes'),
        answer: first.answer,
      });
      if (rows.length === capacity) atCapacity = after;
    }
    const pastCapacity = await replica.snapshot();
    phases.push({ phase: 'first loads (from the store)', requested: rows.length, seconds: rows.reduce((s, r) => s + r.loadMs, 0) / 1000, before: baseline, after: pastCapacity });
    if (rows.length < store.models.length) skipped.push(`first loads: ${store.models.length - rows.length} of ${store.models.length} models not reached`);
    log(`first loads: ${rows.length} models in ${((performance.now() - phaseStart) / 1000).toFixed(1)} s`);

    // Reloads of the models evicted above: the tiers below the store (host memory, disk).
    phaseStart = performance.now();
    const evictedIds = rows.slice(0, Math.max(0, rows.length - capacity)).map((r) => r.id);
    let reloadMs = 0;
    let reloaded = 0;
    for (const id of evictedIds) {
      if (!inTime()) break;
      reloadMs += (await replica.post(`/v2/repository/models/${id}/load`)).ms;
      reloaded++;
    }
    const afterReloads = await replica.snapshot();
    phases.push({ phase: 'reloads (evicted models)', requested: reloaded, seconds: reloadMs / 1000, before: pastCapacity, after: afterReloads });
    if (reloaded < evictedIds.length) skipped.push(`reloads: ${evictedIds.length - reloaded} of ${evictedIds.length} not reached`);
    log(`reloads: ${reloaded} in ${((performance.now() - phaseStart) / 1000).toFixed(1)} s`);

    // Everything unloaded: what eviction gives back to the device. Sessions are released after
    // the cache lets go of them, so the memory is read until it stops moving (5 s at most).
    for (const model of store.models) await replica.post(`/v2/repository/models/${model.id}/unload`);
    let unloaded = await replica.snapshot();
    for (let i = 0; i < 25; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const next = await replica.snapshot();
      const still = next.deviceUsed === unloaded.deviceUsed && next.smiBytes === unloaded.smiBytes && next.loadedBytes === unloaded.loadedBytes;
      unloaded = next;
      if (still && (await replica.loadedCount()) === 0) break;
    }
    const leftLoaded = await replica.loadedCount();

    // The CPU reference, after the replica's measured steps, so its work is not in their latency.
    const diffs = new Map<string, { abs: number; rel: number }>();
    for (const row of rows) {
      const model = store.models.find((m) => m.id === row.id) as CheckModel;
      diffs.set(row.id, difference(row.answer, await cpuAnswer(model, input)));
    }
    const within = [...diffs.values()].every((d) => d.rel <= TOLERANCE);

    const gpu = gpuLine();
    const setup = [
      `A replica process (\`--execution-provider ${o.provider}\`, \`--max-models ${capacity}\`, \`--host-tier-bytes ${HOST_TIER_BYTES / 1024 ** 3}Gi\`) over a file store of ${o.models} models: half wine MLPs of ${(o.modelBytes / 1e6).toFixed(1)} MB (one graph, shared-graph sessions), half distinct graphs (a session each, bench:mux's family). Each model loaded (\`/v2/repository/models/<id>/load\`), run once (first run), then ${o.warmRuns} more (warm, median); requests of ${ROWS} rows over HTTP/JSON, timed from this process. Then the models evicted meanwhile loaded again, and every model unloaded. Answers compared with onnxruntime-node on the CPU in this process, on the same files and input.`,
      `GPU: ${gpu ?? 'none (nvidia-smi absent)'}. Replica started in ${fmt(startSeconds, 1)} s. Metrics the replica does not expose yet read "absent".`,
      skipped.length > 0 ? `**Cut short by --budget-s ${o.budgetS}:** ${skipped.join('; ')}.` : `Every step ran within --budget-s ${o.budgetS}.`,
    ].join('\n\n');
    await writeReport(bench, {
      title: `A replica on ${o.provider === 'cuda' ? 'CUDA' : 'the CPU (dry run)'} with many models`,
      setup,
      sections: checkSections({ rows, phases, capacity, baseline, atCapacity, pastCapacity, afterReloads, unloaded, leftLoaded, diffs }),
      data: {
        gpu: gpu ?? null,
        capacity,
        tolerance: TOLERANCE,
        startSeconds,
        skipped,
        baseline,
        atCapacity: atCapacity ?? null,
        pastCapacity,
        afterReloads,
        unloaded,
        leftLoaded,
        phases,
        models: rows,
        diffs: Object.fromEntries(diffs),
      },
    });
    if (!within) {
      log(`answers differ from the CPU provider's by more than ${TOLERANCE}`);
      process.exitCode = 1;
    }
  } finally {
    await child.stop();
    await rm(store.dir, { recursive: true, force: true });
  }
}

await runBench({ name: 'gpu-check', summary: 'A replica on CUDA with many models: loads by tier, first against warm runs, device bytes, eviction, answers against the CPU.', schema, specs }, main);
