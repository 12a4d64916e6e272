import { z } from 'zod';
import type { OptionSpecs } from '../../common/config.js';
import { runBench, type BenchRun } from '../lib/cli-options.js';
import { writeReport, type ReportSection, type ReportTable } from '../lib/report.js';
import { PATTERNS } from './patterns.js';
import { SCENARIOS, SEEDS, type Scenario } from './scenarios.js';
import { DEFAULT_PARAMS, simulate, type PolicyName, type SimParams, type SimResult } from './simulate.js';
import { targets } from './targets.js';

/**
 * `npm run bench:sim [-- --seed 42,7]`: runs every policy on every traffic pattern, for each
 * pool shape (scenarios.ts) and seed. Writes bench/results/sim.{json,md}.
 */
const POLICIES: readonly PolicyName[] = ['modelmux', 'ray-like', 'ideal'];

const schema = z.object({
  seed: z
    .string()
    .default(SEEDS.join(','))
    .transform((s, ctx) => {
      const seeds = s.split(',').map((x) => Number(x.trim()));
      if (seeds.some((n) => !Number.isInteger(n))) ctx.addIssue({ code: 'custom', message: 'integers separated by commas' });
      return seeds;
    }),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  seed: { flag: 'seed', help: `Comma list of seeds; each runs every scenario (default ${SEEDS.join(',')}).` },
};

interface SeedRun {
  seed: number;
  results: SimResult[];
}

function runScenario(scenario: Scenario, seeds: readonly number[]): SeedRun[] {
  return seeds.map((seed) => {
    const params: SimParams = { ...DEFAULT_PARAMS, ...scenario.params, seed };
    const results: SimResult[] = [];
    for (const pattern of PATTERNS) for (const policy of POLICIES) results.push(simulate(policy, pattern, params));
    return { seed, results };
  });
}

const mark = (b: boolean): string => (b ? 'yes' : '**no**');

function table(runs: readonly SeedRun[]): ReportTable {
  return {
    header: ['seed', 'pattern', 'policy', 'requests', 'loads / 1000 req', 'p99 wait (ms)', 'throughput (req/s)', 'replica 503 retries'],
    rows: runs.flatMap(({ seed, results }) =>
      results.map((r) => [String(seed), r.pattern, r.policy, String(r.requests), r.loadsPer1000.toFixed(1), r.p99WaitMs.toFixed(1), r.throughputPerS.toFixed(1), String(r.retries)]),
    ),
  };
}

function targetTable(runs: readonly SeedRun[]): ReportTable {
  return {
    header: ['seed', 'pattern', 'loads ≤ 1.2 × ideal', 'loads ≤ ray-like', 'p99 wait < ray-like'],
    rows: runs.flatMap(({ seed, results }) => targets(results).map((t) => [String(seed), t.pattern, mark(t.loadsVsIdeal), mark(t.loadsVsRay), mark(t.p99VsRay)])),
  };
}

async function main(run: BenchRun<Options>): Promise<void> {
  const seeds = run.options.seed;
  const scenarios = SCENARIOS.map((scenario) => ({ scenario, runs: runScenario(scenario, seeds) }));
  const sections = scenarios.flatMap(({ scenario: s, runs }, i): ReportSection[] => {
    const heading = i === 0 ? s.title : `Extra: ${s.title}`;
    return [
      { heading, text: `Why: ${s.why}.`, table: table(runs) },
      { text: 'Targets of issue 3, modelmux against the baselines:', table: targetTable(runs), headline: i === 0 },
    ];
  });
  const p = DEFAULT_PARAMS;
  await writeReport(run, {
    title: 'Placement simulator',
    setup: `Unless a section says otherwise: ${p.replicas} replicas × ${p.slots} model slots, maxOngoingRequests ${p.maxOngoingRequests}, inference ${p.inferMs} ms on one compute unit per replica,
model load ${p.loadMs} ms (parallel), ${p.models} models, Poisson arrivals keeping the pool's compute ${p.busy * 100}% busy,
${p.routers} router instances (each request goes to one at random) whose table views are published every ${p.publishEveryMs} ms
and arrive ${p.viewDelayMs} ms × (router index + 1) late, matching timeout ${p.matchTimeoutMs} ms (drawn in [t, 2t]),
${p.durationMs / 1000} s simulated of which the first ${p.warmupMs / 1000} s warm up and are not counted; seeds ${seeds.join(', ')}.
Wait = time from arrival to completion minus the inference itself (router queue, model load, replica queue).
"ideal" is one global LRU over all slots with no concurrency: its loads are the floor, its wait counts only loads.`,
    sections,
    data: { scenarios },
  });
}

await runBench({ name: 'sim', summary: 'The placement simulator: every policy on every traffic pattern and pool shape.', schema, specs }, main);
