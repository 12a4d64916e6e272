import type { SimParams } from './simulate.js';

/** A pool shape the simulator runs every policy and pattern on. */
export interface Scenario {
  title: string;
  /** What it shows, for the report. */
  why: string;
  params: Partial<SimParams>;
}

/** The setup first (the targets); then the shape of the real benchmark (bench/mux.ts). */
export const SCENARIOS: readonly Scenario[] = [
  { title: '8 replicas × 4 slots, 1000 models', why: "issue 3's setup: the targets are checked here", params: {} },
  { title: '2 replicas × 8 slots, 200 models', why: 'the pool of the real benchmark, bench/mux.ts', params: { replicas: 2, slots: 8, models: 200 } },
  {
    title: '2 replicas × 100 slots, 200 models',
    why: 'slots ≥ models: once every model is loaded somewhere nothing needs loading again, so loads should be the compulsory ones',
    params: { replicas: 2, slots: 100, models: 200 },
  },
];

/** The seeds the report and the unit test check the targets over. */
export const SEEDS: readonly number[] = [42, 7, 1234];
