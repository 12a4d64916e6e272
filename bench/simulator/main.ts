import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { PATTERNS } from './patterns.js';
import { SCENARIOS, SEEDS, type Scenario } from './scenarios.js';
import { DEFAULT_PARAMS, simulate, type PolicyName, type SimParams, type SimResult } from './simulate.js';
import { targets } from './targets.js';

/**
 * `npm run bench:sim [-- --seed 42,7] [-- --write]`: runs every policy on every traffic
 * pattern, for each pool shape (scenarios.ts) and seed, and prints Markdown tables; with
 * --write also records them in bench/SIMULATOR.md with the command, the date and the machine.
 */
const POLICIES: readonly PolicyName[] = ['modelmux', 'ray-like', 'ideal'];

function seedsFromArgs(argv: readonly string[]): readonly number[] {
  const i = argv.indexOf('--seed');
  const raw = i === -1 ? undefined : argv[i + 1];
  if (raw === undefined) return SEEDS;
  const seeds = raw.split(',').map(Number);
  if (seeds.some((s) => !Number.isInteger(s))) throw new Error(`--seed takes integers separated by commas, got "${raw}"`);
  return seeds;
}

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

function table(runs: readonly SeedRun[]): string {
  const rows = runs.flatMap(({ seed, results }) =>
    results.map(
      (r) => `| ${seed} | ${r.pattern} | ${r.policy} | ${r.requests} | ${r.loadsPer1000.toFixed(1)} | ${r.p99WaitMs.toFixed(1)} | ${r.throughputPerS.toFixed(1)} | ${r.retries} |`,
    ),
  );
  return ['| seed | pattern | policy | requests | loads / 1000 req | p99 wait (ms) | throughput (req/s) | replica 503 retries |', '|---|---|---|---|---|---|---|---|', ...rows].join('\n');
}

function targetTable(runs: readonly SeedRun[]): string {
  const rows = runs.flatMap(({ seed, results }) => targets(results).map((t) => `| ${seed} | ${t.pattern} | ${mark(t.loadsVsIdeal)} | ${mark(t.loadsVsRay)} | ${mark(t.p99VsRay)} |`));
  return ['| seed | pattern | loads ≤ 1.2 × ideal | loads ≤ ray-like | p99 wait < ray-like |', '|---|---|---|---|---|', ...rows].join('\n');
}

const started = Date.now();
const seeds = seedsFromArgs(process.argv);
const sections = SCENARIOS.map((s, i) => {
  const runs = runScenario(s, seeds);
  const heading = i === 0 ? `## ${s.title}` : `## Extra: ${s.title}`;
  return `${heading}\n\nWhy: ${s.why}.\n\n${table(runs)}\n\nTargets of issue 3, modelmux against the baselines:\n\n${targetTable(runs)}\n`;
});
const p = DEFAULT_PARAMS;
const report = `# Placement simulator

Command: \`npm run bench:sim -- --write\` (bench/simulator/main.ts)
Date: ${new Date().toISOString()}
Machine: ${cpus()[0]?.model ?? 'unknown CPU'} × ${cpus().length}, Node ${process.version}; ran in ${((Date.now() - started) / 1000).toFixed(1)} s of wall time.

Setup, unless a section says otherwise: ${p.replicas} replicas × ${p.slots} model slots, maxOngoingRequests ${p.maxOngoingRequests}, inference ${p.inferMs} ms on one compute unit per replica,
model load ${p.loadMs} ms (parallel), ${p.models} models, Poisson arrivals keeping the pool's compute ${p.busy * 100}% busy,
${p.routers} router instances (each request goes to one at random) whose table views are published every ${p.publishEveryMs} ms
and arrive ${p.viewDelayMs} ms × (router index + 1) late, matching timeout ${p.matchTimeoutMs} ms (drawn in [t, 2t]),
${p.durationMs / 1000} s simulated of which the first ${p.warmupMs / 1000} s warm up and are not counted; seeds ${seeds.join(', ')}.
Wait = time from arrival to completion minus the inference itself (router queue, model load, replica queue).
"ideal" is one global LRU over all slots with no concurrency: its loads are the floor, its wait counts only loads.

${sections.join('\n')}`;
process.stdout.write(report);
if (process.argv.includes('--write')) writeFileSync(new URL('../../../bench/SIMULATOR.md', import.meta.url), report);
