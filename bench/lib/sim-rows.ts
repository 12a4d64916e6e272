import { DEFAULT_PARAMS, simulate, type PolicyName, type SimResult } from '../simulator/simulate.js';
import type { PatternName } from '../simulator/patterns.js';

/**
 * Runs the placement simulator (bench/simulator, the router's) for the measured pool's shape and
 * prints its results as JSON lines. A separate process, so the benchmark can bound its time.
 * argv: replicas slots models maxOngoingRequests patterns(comma list)
 */
const [replicas, slots, models, maxOngoingRequests, patterns] = process.argv.slice(2);
const params = {
  ...DEFAULT_PARAMS,
  replicas: Number(replicas),
  slots: Number(slots),
  models: Number(models),
  maxOngoingRequests: Number(maxOngoingRequests),
  durationMs: 30_000,
  warmupMs: 5_000,
};
process.stdout.write(JSON.stringify({ params }) + '\n');
for (const pattern of (patterns ?? '').split(',') as PatternName[]) {
  for (const policy of ['ideal', 'ray-like', 'modelmux'] as PolicyName[]) {
    const r: SimResult = simulate(policy, pattern, params);
    process.stdout.write(JSON.stringify(r) + '\n');
  }
}
