import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { PATTERNS } from './patterns.js';
import { DEFAULT_PARAMS, simulate, type PolicyName, type SimResult } from './simulate.js';
import { targets } from './targets.js';

/**
 * `npm run bench:sim [-- --write]`: runs every policy on every traffic pattern and prints a
 * Markdown table; with --write also records it in bench/SIMULATOR.md with the command, the
 * date and the machine.
 */
const POLICIES: readonly PolicyName[] = ['modelmux', 'ray-like', 'ideal'];

function runAll(): SimResult[] {
  const out: SimResult[] = [];
  for (const pattern of PATTERNS) for (const policy of POLICIES) out.push(simulate(policy, pattern));
  return out;
}

function targetTable(results: readonly SimResult[]): string {
  const mark = (b: boolean): string => (b ? 'yes' : '**no**');
  const rows = targets(results).map((t) => `| ${t.pattern} | ${mark(t.loadsVsIdeal)} | ${mark(t.loadsVsRay)} | ${mark(t.p99VsRay)} |`);
  return ['| pattern | loads ≤ 1.2 × ideal | loads ≤ ray-like | p99 wait < ray-like |', '|---|---|---|---|', ...rows].join('\n');
}

function table(results: readonly SimResult[]): string {
  const rows = results.map(
    (r) => `| ${r.pattern} | ${r.policy} | ${r.requests} | ${r.loadsPer1000.toFixed(1)} | ${r.p99WaitMs.toFixed(1)} | ${r.throughputPerS.toFixed(1)} | ${r.retries} |`,
  );
  return ['| pattern | policy | requests | loads / 1000 req | p99 wait (ms) | throughput (req/s) | replica 503 retries |', '|---|---|---|---|---|---|---|', ...rows].join('\n');
}

const started = Date.now();
const results = runAll();
const p = DEFAULT_PARAMS;
const report = `# Placement simulator

Command: \`npm run bench:sim -- --write\` (bench/simulator/main.ts)
Date: ${new Date().toISOString()}
Machine: ${cpus()[0]?.model ?? 'unknown CPU'} × ${cpus().length}, Node ${process.version}; ran in ${((Date.now() - started) / 1000).toFixed(1)} s of wall time.

Setup: ${p.replicas} replicas × ${p.slots} model slots, maxOngoingRequests ${p.maxOngoingRequests}, inference ${p.inferMs} ms on one compute unit per replica,
model load ${p.loadMs} ms (parallel), ${p.models} models, Poisson arrivals keeping the pool's compute ${p.busy * 100}% busy,
${p.routers} router instances (each request goes to one at random) whose table views are published every ${p.publishEveryMs} ms
and arrive ${p.viewDelayMs} ms × (router index + 1) late, matching timeout ${p.matchTimeoutMs} ms (drawn in [t, 2t]),
${p.durationMs / 1000} s simulated of which the first ${p.warmupMs / 1000} s warm up and are not counted; seed ${p.seed}.
Wait = time from arrival to completion minus the inference itself (router queue, model load, replica queue).
"ideal" is one global LRU over all slots with no concurrency: its loads are the floor, its wait counts only loads.

${table(results)}

Targets (issue 3), modelmux against the baselines:

${targetTable(results)}
`;
process.stdout.write(report);
if (process.argv.includes('--write')) writeFileSync(new URL('../../../bench/SIMULATOR.md', import.meta.url), report);
