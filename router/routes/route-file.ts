import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { ConfigError } from '../../common/config.js';
import { parseModelRoute, type ModelRoute } from '../../common/model-route.js';

/** Documents one routes file may hold: a bound on what startup parses. */
export const MAX_ROUTES_IN_FILE = 10_000;

/** ModelRoutes by pool key: in static mode, the pool is the route prefix without its slash. */
export type RoutesByPool = Map<string, ModelRoute[]>;

/**
 * The ModelRoutes of a multi-document YAML text, the same objects `kubectl apply` takes, each
 * validated by the one schema (common/model-route.ts). Pure: every problem is returned, with
 * the document's place and name, so a bad file fails the router's start with all of them.
 */
export function parseRoutesYaml(text: string): { routes: RoutesByPool; problems: string[] } {
  const routes: RoutesByPool = new Map();
  const problems: string[] = [];
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) return { routes, problems: ['the file is not YAML documents'] };
  if (docs.length > MAX_ROUTES_IN_FILE) return { routes, problems: [`the file holds ${docs.length} documents; at most ${MAX_ROUTES_IN_FILE}`] };
  const names = new Set<string>();
  docs.forEach((doc, i) => {
    if (doc.errors.length > 0) return void problems.push(`document ${i + 1}: ${doc.errors[0]?.message ?? 'not YAML'}`);
    let raw: unknown;
    try {
      // An unresolved alias throws here; yaml's own maxAliasCount bounds an alias bomb.
      raw = doc.toJS();
    } catch (err) {
      return void problems.push(`document ${i + 1}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (raw === null || raw === undefined) return;
    const parsed = parseModelRoute(raw);
    if (!parsed.ok) return void problems.push(`document ${i + 1}${parsed.name === '' ? '' : ` (${parsed.name})`}: ${parsed.message}`);
    const route = parsed.route;
    if (names.has(route.metadata.name)) return void problems.push(`document ${i + 1}: a second ModelRoute named ${route.metadata.name}`);
    names.add(route.metadata.name);
    const pool = route.spec.deploymentRef.name;
    routes.set(pool, [...(routes.get(pool) ?? []), route]);
  });
  return { routes, problems };
}

/**
 * Reads and parses `path`; throws a ConfigError of `program` (exit code 2) with every problem,
 * each prefixed with `flag` and the path, for the start to fail on.
 */
export function readRoutesFile(path: string, program: string, flag: string): RoutesByPool {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(program, [`${flag} ${path}: ${err instanceof Error ? err.message : String(err)}`]);
  }
  const { routes, problems } = parseRoutesYaml(text);
  if (problems.length > 0)
    throw new ConfigError(
      program,
      problems.map((p) => `${flag} ${path}: ${p}`),
    );
  return routes;
}
