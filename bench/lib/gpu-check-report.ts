import { fmt } from './markdown.js';
import type { ReportSection } from './report.js';
import { delta, LOAD_PHASES, TIERS, type Snapshot } from './replica-snapshot.js';
import { median } from './stats.js';
import type { Family } from './gpu-check-models.js';

/** The GPU check's tables (bench/gpu-check.ts): what it measured, with "absent" for what the replica does not expose. */

export const FAMILIES: readonly Family[] = ['wine', 'distinct'];
/** Largest |replica − CPU| / max(1, |CPU|): TF32 matrix products land near 3e-4 (float32's far under). */
export const TOLERANCE = 2e-3;

export interface ModelRow {
  id: string;
  family: Family;
  loadMs: number;
  firstMs: number;
  warmMs: number;
  /** Device bytes its load and first run took, when no model was evicted meanwhile. */
  deviceGauge: number | undefined;
  deviceSmi: number | undefined;
  loadedBytes: number | undefined;
  answer: number[];
}

export interface PhaseRow {
  phase: string;
  requested: number;
  seconds: number;
  before: Snapshot;
  after: Snapshot;
}

const absent = 'absent';
const shown = (n: number | undefined, digits = 1): string => (n === undefined ? absent : fmt(n, digits));
const mib = (n: number | undefined): string => (n === undefined ? absent : fmt(n / 2 ** 20, 1));

/** What the check hands the report: snapshots of the replica between its steps, and per-model rows. */
export interface CheckOutcome {
  rows: ModelRow[];
  phases: PhaseRow[];
  capacity: number;
  baseline: Snapshot;
  atCapacity: Snapshot | undefined;
  pastCapacity: Snapshot;
  afterReloads: Snapshot;
  unloaded: Snapshot;
  leftLoaded: number;
  diffs: Map<string, { abs: number; rel: number }>;
}

/** Largest absolute and relative (to max(1, |CPU|)) difference of two answers. */
export function difference(got: readonly number[], want: readonly number[]): { abs: number; rel: number } {
  let abs = 0;
  let rel = 0;
  for (const [i, w] of want.entries()) {
    const d = Math.abs((got[i] ?? Number.NaN) - w);
    // NaN never passes: it becomes an infinite difference.
    abs = Math.max(abs, Number.isNaN(d) ? Infinity : d);
    rel = Math.max(rel, Number.isNaN(d) ? Infinity : d / Math.max(1, Math.abs(w)));
  }
  return { abs, rel };
}

function phaseRow(p: PhaseRow): string[] {
  const loads = delta(p.before.loads, p.after.loads);
  const perPhase = LOAD_PHASES.map((ph) => {
    const s = delta(p.before.phaseSeconds[ph], p.after.phaseSeconds[ph]);
    const n = delta(p.before.phaseCount[ph], p.after.phaseCount[ph]);
    return s === undefined || n === undefined || n === 0 ? absent : fmt((1000 * s) / n, 1);
  });
  return [
    p.phase,
    String(p.requested),
    shown(loads, 0),
    fmt(p.seconds, 2),
    loads === undefined || p.seconds === 0 ? absent : fmt(loads / p.seconds, 1),
    ...TIERS.map((t) => {
      const n = delta(p.before.tierLoads[t], p.after.tierLoads[t]);
      return n === undefined ? absent : `${n} (${fmt(n / p.seconds, 1)}/s)`;
    }),
    ...perPhase,
  ];
}

function medianOf(xs: readonly (number | undefined)[]): number | undefined {
  const known = xs.filter((x): x is number => x !== undefined);
  return known.length === 0 ? undefined : median(known);
}

function maxOf(xs: readonly (number | undefined)[]): number | undefined {
  const known = xs.filter((x): x is number => x !== undefined);
  return known.length === 0 ? undefined : Math.max(...known);
}

export function checkSections(c: CheckOutcome): ReportSection[] {
  const { rows, phases, capacity, baseline, atCapacity, pastCapacity, afterReloads, unloaded, leftLoaded, diffs } = c;
  const within = [...diffs.values()].every((d) => d.rel <= TOLERANCE);
  const byFamily = (f: Family): ModelRow[] => rows.filter((r) => r.family === f);
  const budget = afterReloads.deviceBudget ?? pastCapacity.deviceBudget;
  const memorySources: [string, (s: Snapshot) => number | undefined, (r: ModelRow) => number | undefined][] = [
    ['device gauge (modelmux_replica_device_bytes_used)', (s) => s.deviceUsed, (r) => r.deviceGauge],
    ['nvidia-smi, the replica process', (s) => s.smiBytes, (r) => r.deviceSmi],
    ['model files loaded (modelmux_replica_loaded_bytes)', (s) => s.loadedBytes, (r) => r.loadedBytes],
  ];
  return [
    {
      heading: 'Loads per second by tier',
      headline: true,
      text: 'Loads counted by the replica (`modelmux_replica_model_loads_total`, by tier from `modelmux_replica_model_loads_by_tier_total`) over the seconds the load requests took; mean load and warm phase from `modelmux_replica_model_load_phase_seconds`.',
      table: {
        header: ['step', 'load requests', 'loads', 'seconds', 'loads / s', ...TIERS.map((t) => `tier ${t}`), 'load phase, ms', 'warm phase, ms'],
        rows: phases.map(phaseRow),
      },
    },
    {
      heading: 'First run against warm runs',
      headline: true,
      table: {
        header: ['family', 'models', 'load ms (p50)', 'first run ms (p50)', 'first run ms (max)', 'warm ms (p50)', 'first / warm (p50)'],
        rows: FAMILIES.map((f) => {
          const fr = byFamily(f);
          return [
            f,
            String(fr.length),
            fmt(medianOf(fr.map((r) => r.loadMs)), 1),
            fmt(medianOf(fr.map((r) => r.firstMs)), 1),
            fmt(maxOf(fr.map((r) => r.firstMs)), 1),
            fmt(medianOf(fr.map((r) => r.warmMs)), 2),
            fmt(medianOf(fr.map((r) => r.firstMs / r.warmMs)), 1),
          ];
        }),
      },
    },
    {
      heading: 'Device bytes per model against the budget',
      headline: true,
      text: `What one model's load and first run added, over the models loaded before the first eviction; the budget from \`modelmux_replica_device_bytes_budget\`: ${mib(budget)} MiB.`,
      table: {
        header: ['source', ...FAMILIES.flatMap((f) => [`${f}: MiB per model (p50)`, `${f}: max`]), `${capacity} models at the larger p50, MiB`, 'of the budget'],
        rows: memorySources.map(([name, , per]) => {
          const p50s = FAMILIES.map((f) => medianOf(byFamily(f).map(per)));
          const worst = maxOf(p50s);
          const full = worst === undefined ? undefined : worst * capacity;
          return [
            name,
            ...FAMILIES.flatMap((f, i) => [mib(p50s[i]), mib(maxOf(byFamily(f).map(per)))]),
            mib(full),
            full === undefined || budget === undefined || budget === 0 ? absent : fmt(full / budget, 2),
          ];
        }),
      },
    },
    {
      heading: 'Eviction returning device memory',
      headline: true,
      text: `Evictions counted: ${shown(delta(baseline.evictions, afterReloads.evictions), 0)}; models in the cache after the unloads (\`GET /models\`): ${leftLoaded}.`,
      table: {
        header: ['source', 'started, MiB', `at capacity (${capacity} models)`, `after ${rows.length} loads`, 'after the reloads', 'all unloaded', 'given back of the peak'],
        rows: memorySources.map(([name, of]) => {
          const peak = maxOf([of(atCapacity ?? pastCapacity), of(pastCapacity), of(afterReloads)]);
          const back = delta(of(unloaded), peak);
          return [name, mib(of(baseline)), mib(of(atCapacity ?? pastCapacity)), mib(of(pastCapacity)), mib(of(afterReloads)), mib(of(unloaded)), mib(back)];
        }),
      },
    },
    {
      heading: 'Answers against the CPU provider',
      headline: true,
      text: `Largest |replica − CPU| / max(1, |CPU|) allowed: ${TOLERANCE}. All within: **${within ? 'yes' : 'no'}**.`,
      table: {
        header: ['family', 'models', 'max abs diff', 'max rel diff', 'within tolerance'],
        rows: FAMILIES.map((f) => {
          const d = byFamily(f).map((r) => diffs.get(r.id) as { abs: number; rel: number });
          const rel = maxOf(d.map((x) => x.rel));
          return [f, String(d.length), (maxOf(d.map((x) => x.abs)) ?? Number.NaN).toExponential(2), (rel ?? Number.NaN).toExponential(2), rel !== undefined && rel <= TOLERANCE ? 'yes' : 'no'];
        }),
      },
    },
  ];
}
