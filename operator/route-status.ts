import { ROUTE_REASONS, parseModelRoute, routeKind, routeSummary, type ModelRoute, type ModelRouteStatus, type RouteCondition } from '../common/model-route.js';
import { RouteIndex } from '../common/route-index.js';

/** A ModelRoute as the informer holds it: the spec is still to be validated. */
export interface StoredRoute {
  metadata?: { name?: string; namespace?: string; generation?: number; creationTimestamp?: string | Date };
  spec?: unknown;
  status?: ModelRouteStatus;
}

type ConditionCore = Pick<RouteCondition, 'type' | 'status' | 'reason' | 'message'>;

/**
 * The status every ModelRoute of one namespace should have. Pure, and computed for the whole
 * namespace at once because a route's verdict depends on its neighbours: who else claims its
 * public name in the pool, and whether the routes it names lead back to it.
 */
export function computeRouteStatuses(stored: readonly StoredRoute[], poolExists: (pool: string) => boolean, now: Date): Map<string, ModelRouteStatus> {
  const cores = new Map<string, { accepted: ConditionCore; resolved: ConditionCore; route?: ModelRoute }>();
  const byPool = new Map<string, ModelRoute[]>();
  for (const raw of stored) {
    const name = raw.metadata?.name;
    if (name === undefined) continue;
    const creationTimestamp = raw.metadata?.creationTimestamp;
    const parsed = parseModelRoute({
      apiVersion: 'modelmux.io/v1alpha1',
      kind: 'ModelRoute',
      metadata: { name, ...(creationTimestamp !== undefined ? { creationTimestamp } : {}) },
      spec: raw.spec,
    });
    if (!parsed.ok) {
      cores.set(name, {
        accepted: { type: 'Accepted', status: 'False', reason: ROUTE_REASONS.invalid, message: `spec.${parsed.message}` },
        resolved: { type: 'ResolvedRefs', status: 'Unknown', reason: ROUTE_REASONS.invalid, message: 'The spec is invalid.' },
      });
      continue;
    }
    const pool = parsed.route.spec.deploymentRef.name;
    byPool.set(pool, [...(byPool.get(pool) ?? []), parsed.route]);
  }
  for (const [pool, routes] of byPool) {
    const index = RouteIndex.build(routes);
    const exists = poolExists(pool);
    for (const entry of index.entries()) {
      const problem = entry.problem;
      const conflict = problem?.reason === ROUTE_REASONS.nameConflict;
      const accepted: ConditionCore = conflict
        ? { type: 'Accepted', status: 'False', reason: problem.reason, message: problem.message }
        : { type: 'Accepted', status: 'True', reason: ROUTE_REASONS.accepted, message: `Routes ${entry.name} in pool ${pool}.` };
      const resolved: ConditionCore = !exists
        ? { type: 'ResolvedRefs', status: 'False', reason: ROUTE_REASONS.poolNotFound, message: `MultiplexedDeployment ${pool} does not exist in this namespace.` }
        : problem !== undefined && !conflict
          ? { type: 'ResolvedRefs', status: 'False', reason: problem.reason, message: problem.message }
          : { type: 'ResolvedRefs', status: 'True', reason: ROUTE_REASONS.resolved, message: `Pool ${pool} exists; no route cycle.` };
      cores.set(entry.route.metadata.name, { accepted, resolved, route: entry.route });
    }
  }
  const out = new Map<string, ModelRouteStatus>();
  for (const raw of stored) {
    const name = raw.metadata?.name;
    const core = name === undefined ? undefined : cores.get(name);
    if (name === undefined || core === undefined) continue;
    const generation = raw.metadata?.generation;
    const previous = raw.status?.conditions ?? [];
    const conditions = [core.accepted, core.resolved].map((c): RouteCondition => {
      const before = previous.find((p) => p.type === c.type);
      const lastTransitionTime = before !== undefined && before.status === c.status ? before.lastTransitionTime : now.toISOString();
      return generation === undefined ? { ...c, lastTransitionTime } : { ...c, lastTransitionTime, observedGeneration: generation };
    });
    const status: ModelRouteStatus = { conditions };
    if (generation !== undefined) status.observedGeneration = generation;
    if (core.route !== undefined) {
      status.kind = routeKind(core.route.spec);
      status.backends = routeSummary(core.route.spec);
    }
    out.set(name, status);
  }
  return out;
}

/** Whether a desired status differs from the stored one: a write is skipped when it would change nothing. */
export function routeStatusChanged(before: ModelRouteStatus | undefined, after: ModelRouteStatus): boolean {
  const norm = (s: ModelRouteStatus | undefined): unknown =>
    s === undefined
      ? undefined
      : [
          s.observedGeneration,
          s.kind,
          s.backends,
          [...(s.conditions ?? [])].sort((a, b) => a.type.localeCompare(b.type)).map((c) => [c.type, c.status, c.reason, c.message, c.lastTransitionTime, c.observedGeneration]),
        ];
  return JSON.stringify(norm(before)) !== JSON.stringify(norm(after));
}
