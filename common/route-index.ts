import { MAX_ROUTE_DEPTH, ROUTE_REASONS, publicName, routeKind, routeTargets, type MirrorSpec, type ModelRoute, type RouteKind, type SplitSpec } from './model-route.js';

/** Why a route cannot serve: the reason is its status condition's reason and the request error's detail. */
export interface RouteProblem {
  reason: typeof ROUTE_REASONS.nameConflict | typeof ROUTE_REASONS.refCycle | typeof ROUTE_REASONS.depthExceeded;
  message: string;
}

export interface RouteEntry {
  /** The public model name. */
  name: string;
  kind: RouteKind;
  route: ModelRoute;
  problem?: RouteProblem | undefined;
}

/** Picks a split's backend model for one request (weights, sticky header): the router's choice, pure here. */
export type ChooseBackend = (split: SplitSpec, routeName: string) => string;

export type RouteResolution =
  /** A model id of the pool; `routes` are the public names passed through, first the requested one. */
  | { kind: 'model'; model: string; routes: string[]; mirrors: MirrorSpec[] }
  | { kind: 'ensemble' | 'sequence'; route: ModelRoute; routes: string[]; mirrors: MirrorSpec[] }
  | { kind: 'refused'; routes: string[]; problem: RouteProblem };

/**
 * The routes of one pool by public name, with the problems that keep a route from serving
 * computed once per change, so that a request never walks a cycle: a request only follows
 * routes whose problem is undefined, and those have a route chain at most MAX_ROUTE_DEPTH long.
 */
export class RouteIndex {
  private constructor(
    private readonly byName: ReadonlyMap<string, RouteEntry>,
    /** Every route of the pool by metadata.name, the losers of a name conflict included. */
    private readonly byObject: ReadonlyMap<string, RouteEntry>,
  ) {}

  static readonly EMPTY = new RouteIndex(new Map(), new Map());

  /**
   * Indexes the routes of one pool. When two routes claim one public name, the older one keeps
   * it (creationTimestamp, then object name), as Gateway API resolves conflicting routes.
   */
  static build(routes: readonly ModelRoute[]): RouteIndex {
    const ordered = [...routes].sort((a, b) => compare(a.metadata.creationTimestamp ?? '', b.metadata.creationTimestamp ?? '') || compare(a.metadata.name, b.metadata.name));
    const byName = new Map<string, RouteEntry>();
    const byObject = new Map<string, RouteEntry>();
    for (const route of ordered) {
      const entry: RouteEntry = { name: publicName(route), kind: routeKind(route.spec), route };
      const holder = byName.get(entry.name);
      if (holder === undefined) byName.set(entry.name, entry);
      else entry.problem = { reason: ROUTE_REASONS.nameConflict, message: `public name ${entry.name} is already routed by ${holder.route.metadata.name}` };
      byObject.set(route.metadata.name, entry);
    }
    markGraphProblems(byName);
    return new RouteIndex(byName, byObject);
  }

  get size(): number {
    return this.byName.size;
  }

  /** The route serving public name `name`: the one lookup every request pays. */
  get(name: string): RouteEntry | undefined {
    return this.byName.get(name);
  }

  /** The route object `objectName` (metadata.name), for its status. */
  entryOf(objectName: string): RouteEntry | undefined {
    return this.byObject.get(objectName);
  }

  entries(): IterableIterator<RouteEntry> {
    return this.byObject.values();
  }

  /**
   * Follows `name` through splits (route of routes) to a model id, or to the ensemble or
   * sequence that must serve it. A name that is no route resolves to itself.
   */
  resolve(name: string, choose: ChooseBackend): RouteResolution {
    const routes: string[] = [];
    const mirrors: MirrorSpec[] = [];
    let current = name;
    for (;;) {
      const entry = this.byName.get(current);
      if (entry === undefined) return { kind: 'model', model: current, routes, mirrors };
      routes.push(entry.name);
      // markGraphProblems bounds every problem-free chain; the depth test keeps that a local fact.
      if (entry.problem !== undefined) return { kind: 'refused', routes, problem: entry.problem };
      if (routes.length > MAX_ROUTE_DEPTH) return { kind: 'refused', routes, problem: depthProblem(name) };
      const split = entry.route.spec.split;
      if (split === undefined) return { kind: entry.kind as 'ensemble' | 'sequence', route: entry.route, routes, mirrors };
      if (split.mirror !== undefined) mirrors.push(split.mirror);
      current = choose(split, entry.name);
    }
  }
}

/** Code-unit order: RFC 3339 times and object names sort by it, and it is far cheaper than localeCompare. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function depthProblem(name: string): RouteProblem {
  return { reason: ROUTE_REASONS.depthExceeded, message: `route ${name} passes through more than ${MAX_ROUTE_DEPTH} routes` };
}

/**
 * Marks routes on or leading into a cycle (RefCycle) and routes whose longest route chain is
 * deeper than MAX_ROUTE_DEPTH (DepthExceeded). Iterative depth-first search: a pool may hold
 * thousands of routes and the chain must not be bounded by the JavaScript stack.
 */
function markGraphProblems(byName: ReadonlyMap<string, RouteEntry>): void {
  const height = new Map<string, number>();
  const cyclic = new Set<string>();
  const onPath = new Map<string, number>();
  const path: string[] = [];
  const edges = new Map<string, string[]>();
  for (const [name, entry] of byName)
    edges.set(
      name,
      routeTargets(entry.route.spec).filter((t) => byName.has(t)),
    );
  const children = (name: string): string[] => [...(edges.get(name) ?? [])];
  for (const root of byName.keys()) {
    if (height.has(root)) continue;
    const stack: { name: string; next: string[] }[] = [{ name: root, next: children(root) }];
    onPath.set(root, 0);
    path.push(root);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const child = top.next.pop();
      if (child !== undefined) {
        const at = onPath.get(child);
        if (at !== undefined) {
          for (let i = at; i < path.length; i++) cyclic.add(path[i]!);
        } else if (!height.has(child)) {
          onPath.set(child, path.length);
          path.push(child);
          stack.push({ name: child, next: children(child) });
        }
        continue;
      }
      stack.pop();
      path.pop();
      onPath.delete(top.name);
      let h = 1;
      for (const c of edges.get(top.name) ?? []) {
        if (cyclic.has(c)) cyclic.add(top.name);
        h = Math.max(h, 1 + (height.get(c) ?? 0));
      }
      height.set(top.name, h);
    }
  }
  for (const [name, entry] of byName) {
    if (cyclic.has(name)) {
      entry.problem = {
        reason: ROUTE_REASONS.refCycle,
        message: `route ${name} refers back to itself through ${routeTargets(entry.route.spec)
          .filter((t) => cyclic.has(t))
          .join(', ')}`,
      };
    } else if ((height.get(name) ?? 1) > MAX_ROUTE_DEPTH) {
      entry.problem = depthProblem(name);
    }
  }
}
