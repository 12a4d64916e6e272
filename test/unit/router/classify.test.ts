import { silentLogger } from '../../../common/log.js';
import { parseModelRoute, type ModelRoute, type ModelRouteSpecInput } from '../../../common/model-route.js';
import { systemClock } from '../../../common/clock.js';
import { systemSetTimer } from '../../../router/placement/balancer.js';
import { classifyForm, classifyRequest, type RequestClass } from '../../../router/routes/classify.js';
import { RouteTable } from '../../../router/routes/route-table.js';

const modelRoute = (name: string, spec: ModelRouteSpecInput): ModelRoute => {
  const r = parseModelRoute({ apiVersion: 'modelmux.io/v1alpha1', kind: 'ModelRoute', metadata: { name }, spec });
  if (!r.ok) throw new Error(r.message);
  return r.route;
};

/** A route table with pool `/wine` and its ModelRoutes; `random` is the routes' random source (weights, mirror sampling). */
function table(routes: ModelRoute[], random = (): number => 0.5): RouteTable {
  const t = new RouteTable({ recentMs: 5000, tableLagMs: 2000, maxQueue: 8, connectionsPerReplica: 1 }, systemClock, random, systemSetTimer, silentLogger);
  t.apply([{ prefix: '/wine', pool: 'wine', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: [] }]);
  t.applyModelRoutes(new Map([['wine', routes]]));
  return t;
}

const ROUTES = [
  modelRoute('canary', { deploymentRef: { name: 'wine' }, split: { backends: [{ model: 'wine-7@1', weight: 1 }], stickyHeader: 'x-user', mirror: { model: 'wine-7@3', percent: 100 } } }),
  modelRoute('avg', { deploymentRef: { name: 'wine' }, ensemble: { members: [{ model: 'a' }, { model: 'b' }], combine: 'mean' } }),
  modelRoute('loop', { deploymentRef: { name: 'wine' }, split: { backends: [{ model: 'loop', weight: 1 }] } }),
];

function kind(c: RequestClass): string {
  return c.kind === 'refused' ? `refused ${c.error.code}` : c.kind;
}

describe('classifyRequest: what a request is, decided once before dispatch', () => {
  const routes = table(ROUTES);

  it('takes a request for a plain model, or for none, as plain, with the target split into prefix, rest and query', () => {
    const c = classifyRequest('POST', '/wine/v2/models/m1/infer?x=1', {}, [], routes);
    expect(c).toMatchObject({ kind: 'plain', prefix: '/wine', rest: '/v2/models/m1/infer', query: '?x=1', path: '/wine/v2/models/m1/infer', form: 'v2', model: 'm1', repository: false });
    expect(classifyRequest('GET', '/wine/v2/health/ready', {}, [], routes)).toMatchObject({ kind: 'plain', model: undefined });
    expect(classifyRequest('POST', '/wine', { serve_multiplexed_model_id: 'm2' }, [], routes)).toMatchObject({ kind: 'plain', form: 'ray', model: 'm2', rest: '' });
  });

  it('resolves a split route’s public name to its backend, with the mirrors sampled for it, in every request form', () => {
    expect(classifyRequest('POST', '/wine/v2/models/canary/infer', {}, [], routes)).toMatchObject({ kind: 'split', model: 'wine-7@1', routeName: 'canary', mirrors: [{ model: 'wine-7@3' }] });
    expect(classifyRequest('POST', '/wine/invocations', { 'x-amzn-sagemaker-target-model': 'canary' }, [], routes)).toMatchObject({ kind: 'split', form: 'sagemaker', model: 'wine-7@1' });
    // A read is not copied; nor is a mirror copy itself.
    expect(classifyRequest('GET', '/wine/v2/models/canary', {}, [], routes)).toMatchObject({ kind: 'split', mirrors: [] });
    expect(classifyRequest('POST', '/wine/v2/models/canary/infer', {}, [], routes, { mirror: true })).toMatchObject({ kind: 'split', mirrors: [] });
  });

  it('hands an ensemble or a sequence’s name to the composite, which answers it', () => {
    const c = classifyRequest('POST', '/wine/v2/models/avg/infer', {}, [], routes);
    expect(c.kind).toBe('composite');
    expect(c.kind === 'composite' && c.modelRoute.metadata.name).toBe('avg');
  });

  it('tells a repository call by its path alone, before reading its model id, and places an admitted load as a plain request that names no route', () => {
    expect(classifyRequest('POST', '/wine/v2/repository/index', {}, [], routes)).toMatchObject({ kind: 'repository', call: 'index' });
    expect(classifyRequest('POST', '/wine/v2/repository/models/canary/unload', {}, [], routes)).toMatchObject({ kind: 'repository', call: 'unload' });
    const load = classifyRequest('POST', '/wine/v2/repository/models/..%2Fetc/load', {}, [], routes);
    expect(load).toMatchObject({ kind: 'repository', call: 'load' });
    expect(kind(classifyForm('POST', load, routes.match('/wine') as never, {}, []))).toBe('refused invalid_model_id');
    const named = classifyRequest('POST', '/wine/v2/repository/models/canary/load', {}, [], routes);
    expect(classifyForm('POST', named, routes.match('/wine') as never, {}, [])).toMatchObject({ kind: 'plain', model: 'canary', repository: true });
    // Not a call of the extension: a GET, or a path it lacks.
    expect(kind(classifyRequest('GET', '/wine/v2/repository/index', {}, [], routes))).toBe('refused not_found');
  });

  it('refuses what it cannot route, with the code the client gets, and never throws', () => {
    expect(kind(classifyRequest('POST', '/beer/v2/models/m1/infer', {}, [], routes))).toBe('refused route_not_found');
    expect(kind(classifyRequest('POST', '/wine/v2/models/a..b/infer', {}, [], routes))).toBe('refused invalid_model_id');
    expect(kind(classifyRequest('POST', '/wine', {}, [], routes))).toBe('refused missing_model_id');
    expect(kind(classifyRequest('POST', '/wine/V2/MODELS/m1/INFER', {}, [], routes))).toBe('refused not_found');
    expect(kind(classifyRequest('POST', '/wine/v2/models/loop/infer', {}, [], routes))).toBe('refused route_cycle');
  });

  it('draws a split’s weighted choice from the injected random source, and a sticky one from the request’s header', () => {
    const weighted = [
      modelRoute('ab', {
        deploymentRef: { name: 'wine' },
        split: {
          backends: [
            { model: 'a', weight: 1 },
            { model: 'b', weight: 1 },
          ],
          stickyHeader: 'x-user',
        },
      }),
    ];
    expect(
      classifyRequest(
        'POST',
        '/wine/v2/models/ab/infer',
        {},
        [],
        table(weighted, () => 0.1),
      ),
    ).toMatchObject({ model: 'a' });
    expect(
      classifyRequest(
        'POST',
        '/wine/v2/models/ab/infer',
        {},
        [],
        table(weighted, () => 0.9),
      ),
    ).toMatchObject({ model: 'b' });
    const sticky = (user: string): unknown => (classifyRequest('POST', '/wine/v2/models/ab/infer', {}, ['x-user', user], table(weighted, Math.random)) as { model?: string }).model;
    for (const user of ['u1', 'u2', 'u3']) expect(new Set(Array.from({ length: 20 }, () => sticky(user))).size).toBe(1);
  });
});
