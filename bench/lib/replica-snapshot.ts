import { deviceBytesOfPid } from './nvidia-smi.js';
import { readMetric } from './prom-text.js';

/**
 * What the GPU check reads off a replica between its steps: the /metrics it exposes and
 * nvidia-smi's view of its process. A metric the replica does not expose yet (the load tiers,
 * the load phases and the device gauges arrive with issue 49's other items) stays undefined and
 * is reported as absent.
 */

export const TIERS = ['host', 'disk', 'peer', 'store'] as const;
export type Tier = (typeof TIERS)[number];
export const LOAD_PHASES = ['load', 'warm'] as const;
export type LoadPhase = (typeof LOAD_PHASES)[number];

export const METRICS = {
  deviceUsed: 'modelmux_replica_device_bytes_used',
  deviceBudget: 'modelmux_replica_device_bytes_budget',
  loadedBytes: 'modelmux_replica_loaded_bytes',
  loads: 'modelmux_replica_model_loads_total',
  tierLoads: 'modelmux_replica_model_loads_by_tier_total',
  loadPhase: 'modelmux_replica_model_load_phase_seconds',
  evictions: 'modelmux_replica_model_evictions_total',
} as const;

export interface Snapshot {
  deviceUsed: number | undefined;
  deviceBudget: number | undefined;
  /** nvidia-smi's bytes for the replica's pid; undefined without nvidia-smi. */
  smiBytes: number | undefined;
  loadedBytes: number | undefined;
  loads: number | undefined;
  evictions: number | undefined;
  tierLoads: Record<Tier, number | undefined>;
  phaseSeconds: Record<LoadPhase, number | undefined>;
  phaseCount: Record<LoadPhase, number | undefined>;
}

export function parseSnapshot(text: string, smiBytes: number | undefined): Snapshot {
  const byTier = (tier: Tier): number | undefined => readMetric(text, METRICS.tierLoads, { tier });
  const phase = (suffix: string) => (p: LoadPhase) => readMetric(text, `${METRICS.loadPhase}${suffix}`, { phase: p }, METRICS.loadPhase);
  return {
    deviceUsed: readMetric(text, METRICS.deviceUsed),
    deviceBudget: readMetric(text, METRICS.deviceBudget),
    smiBytes,
    loadedBytes: readMetric(text, METRICS.loadedBytes),
    loads: readMetric(text, METRICS.loads, { result: 'success' }),
    evictions: readMetric(text, METRICS.evictions),
    tierLoads: { host: byTier('host'), disk: byTier('disk'), peer: byTier('peer'), store: byTier('store') },
    phaseSeconds: { load: phase('_sum')('load'), warm: phase('_sum')('warm') },
    phaseCount: { load: phase('_count')('load'), warm: phase('_count')('warm') },
  };
}

export async function snapshot(base: string, pid: number): Promise<Snapshot> {
  const res = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(30_000) });
  if (res.status !== 200) throw new Error(`replica /metrics answered ${res.status}`);
  return parseSnapshot(await res.text(), deviceBytesOfPid(pid));
}

/** `after − before`, undefined when either is. */
export function delta(before: number | undefined, after: number | undefined): number | undefined {
  return before === undefined || after === undefined ? undefined : after - before;
}
