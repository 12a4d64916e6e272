import { ModelmuxError, toModelmuxError } from '../../common/errors.js';
import type { MirrorSpec, ModelRoute } from '../../common/model-route.js';
import { matchRequest, parseRequest, type HeaderBag, type RequestForm } from '../../common/request-grammar.js';
import type { Route } from './route-table.js';

/** The parts of a request's target the router routes by. */
export interface TargetParts {
  /** The path without its query string. */
  path: string;
  /** The route prefix: the path's first segment (`/wine`). */
  prefix: string;
  /** The path below the prefix ('' or '/…'): what the replica is asked. */
  rest: string;
  /** The query string with its '?', or ''. */
  query: string;
}

/**
 * What a request is, decided once, before anything is done with it:
 * - `plain`: a request to a pool, placed by its model (or by none: health, server metadata);
 * - `split`: its model is a split ModelRoute's public name, resolved to the backend to send it to
 *   (and the mirrors it is copied to);
 * - `composite`: its model is an ensemble or a sequence, which answers it (router/composite/);
 * - `repository`: a call of the model repository API (index, load, unload), which the listener
 *   admits or refuses first (repository-access.ts) and which is fanned out to the pool's replicas,
 *   or placed (an admitted load);
 * - `refused`: no route serves it, or its model id or path is not valid: answered with `error`.
 */
export type RequestClass = TargetParts &
  (
    | { kind: 'plain'; route: Route; form: RequestForm; model: string | undefined; repository: boolean }
    | { kind: 'split'; route: Route; form: RequestForm; model: string; routeName: string; mirrors: readonly MirrorSpec[] }
    | { kind: 'composite'; route: Route; form: RequestForm; modelRoute: ModelRoute }
    | { kind: 'repository'; route: Route; call: 'index' | 'load' | 'unload' }
    | { kind: 'refused'; route: Route | undefined; error: ModelmuxError }
  );

/** What classification reads of the route table. */
export interface RouteLookup {
  match(prefix: string): Route | undefined;
}

export interface ClassifyOptions {
  /** A mirror copy (route-mirror.ts) is resolved like any request but never copied again. */
  mirror?: boolean;
}

const NOT_COPIED: readonly MirrorSpec[] = [];

/**
 * Classifies a request by its method, target and model headers (`modelHeaders`: the request
 * grammar's, already picked from the raw headers; `rawHeaders` for a split's sticky header).
 * Pure but for the route's random source, which a split's weighted choice and mirror sampling
 * draw from (injected: model-routing.ts). Never throws: a request it cannot route is `refused`.
 */
export function classifyRequest(method: string, url: string, modelHeaders: HeaderBag, rawHeaders: readonly string[], routes: RouteLookup, options: ClassifyOptions = {}): RequestClass {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const slash = path.indexOf('/', 1);
  const prefix = slash === -1 ? path : path.slice(0, slash);
  const rest = slash === -1 ? '' : path.slice(slash);
  const query = q === -1 ? '' : url.slice(q);
  const route = routes.match(prefix);
  if (route === undefined) return { kind: 'refused', path, prefix, rest, query, route, error: new ModelmuxError('route_not_found', `no route serves ${prefix}`) };
  // A repository call is told apart by its path alone: whether the caller may make it is decided
  // before its model id is read.
  const call = method === 'POST' && rest.startsWith('/v2/repository/') ? matchRequest('POST', rest)?.repository : undefined;
  if (call !== undefined) return { kind: 'repository', path, prefix, rest, query, route, call };
  return classifyForm(method, { path, prefix, rest, query }, route, modelHeaders, rawHeaders, options);
}

/**
 * The request's form and model: a plain request, or one for a ModelRoute's public name. An
 * admitted repository load comes here too: it names a model, never a route, and is placed as a
 * request for that model would be.
 */
export function classifyForm(method: string, parts: TargetParts, route: Route, modelHeaders: HeaderBag, rawHeaders: readonly string[], options: ClassifyOptions = {}): RequestClass {
  // Only the parts: `parts` may be a repository call's whole class.
  const t: TargetParts = { path: parts.path, prefix: parts.prefix, rest: parts.rest, query: parts.query };
  let target;
  try {
    target = parseRequest(method, t.rest === '' ? '/' : t.rest, modelHeaders);
  } catch (err) {
    return { kind: 'refused', ...t, route, error: toModelmuxError(err) };
  }
  const { form, model } = target;
  const repository = target.repository !== undefined;
  // One lookup for a plain model; a repository request names models, never routes.
  if (model === undefined || repository || !route.models.has(model)) return { kind: 'plain', ...t, route, form, model, repository };
  let r;
  try {
    r = route.models.resolve(model, rawHeaders);
  } catch (err) {
    return { kind: 'refused', ...t, route, error: toModelmuxError(err) };
  }
  if (r.kind !== 'model') return { kind: 'composite', ...t, route, form, modelRoute: r.route };
  // Only inference is copied: a metadata or readiness read tells a shadow model nothing.
  const copy = options.mirror !== true && r.mirrors.length > 0 && method === 'POST';
  return { kind: 'split', ...t, route, form, model: r.model, routeName: r.routes[0] as string, mirrors: copy ? route.models.sampleMirrors(r.mirrors) : NOT_COPIED };
}
