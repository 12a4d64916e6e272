import type { MultiplexedDeploymentSpec } from './resource.js';

/**
 * What a pool's settings cost the control plane through its model tables, and the bounds the
 * operator checks them against (the `TablesBounded` condition, ADR 0029). Each replica patches
 * its pod at most once per `tablePublishIntervalMs`, and every router keeps every replica's
 * table, so the two costs are the pool's largest replica count times those settings.
 */

/**
 * Pod patches a second from one pool's tables: the most bench:tables measured (200 replicas at
 * one a second: 0.6 of a core of API server and etcd, every change at both routers within
 * 2.9 s; ADR 0029, `npm run bench:tables`). Past it, raise tablePublishIntervalMs.
 */
export const MAX_TABLE_PATCHES_PER_SECOND = 200;

/**
 * Table entries (replica × loaded model) one pool may have each router keep: 1,000,000 ids of
 * 200 characters, parsed and indexed as a router holds them, take 260 MB of its heap, and under
 * full churn each router re-reads a replica's whole table once per publication interval.
 */
export const MAX_TABLE_ENTRIES = 1_000_000;

export interface TableCosts {
  /** The pool's largest replica count: spec.replicas, or autoscaling.maxReplicas when higher. */
  replicas: number;
  /** Pod patches a second from table publication when every replica's models churn. */
  patchesPerSecond: number;
  /** Table entries each router keeps when every replica is full. */
  entries: number;
}

export function tableCosts(spec: Pick<MultiplexedDeploymentSpec, 'replicas' | 'autoscaling' | 'maxModelsPerReplica' | 'tablePublishIntervalMs'>): TableCosts {
  const replicas = Math.max(spec.replicas, spec.autoscaling?.maxReplicas ?? 0);
  return { replicas, patchesPerSecond: (replicas * 1000) / spec.tablePublishIntervalMs, entries: replicas * spec.maxModelsPerReplica };
}

export type TableBoundVerdict = { ok: true; message: string } | { ok: false; reason: 'TooManyTablePatches' | 'TooManyTableEntries'; message: string };

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** Whether the pool's settings stay within the bounds, said so a user knows what to change. */
export function checkTableBounds(spec: Parameters<typeof tableCosts>[0]): TableBoundVerdict {
  const c = tableCosts(spec);
  if (c.entries > MAX_TABLE_ENTRIES) {
    return {
      ok: false,
      reason: 'TooManyTableEntries',
      message: `Up to ${fmt(c.replicas)} replicas of ${fmt(spec.maxModelsPerReplica)} models make each router keep up to ${fmt(c.entries)} table entries, more than the ${fmt(MAX_TABLE_ENTRIES)} it is sized for; lower maxModelsPerReplica to at most ${fmt(Math.floor(MAX_TABLE_ENTRIES / c.replicas))} or the replica count.`,
    };
  }
  if (c.patchesPerSecond > MAX_TABLE_PATCHES_PER_SECOND) {
    const interval = Math.min(60_000, Math.ceil((c.replicas * 1000) / MAX_TABLE_PATCHES_PER_SECOND / 100) * 100);
    return {
      ok: false,
      reason: 'TooManyTablePatches',
      message: `Up to ${fmt(c.replicas)} replicas publishing every ${fmt(spec.tablePublishIntervalMs)} ms write up to ${fmt(c.patchesPerSecond)} pod patches a second, more than the ${fmt(MAX_TABLE_PATCHES_PER_SECOND)} the control plane was measured to take; set tablePublishIntervalMs to at least ${fmt(interval)}.`,
    };
  }
  return { ok: true, message: `Up to ${fmt(c.patchesPerSecond)} table patches a second and ${fmt(c.entries)} table entries per router.` };
}
