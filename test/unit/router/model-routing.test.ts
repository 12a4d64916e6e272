import { silentLogger } from '../../../common/log.js';
import { systemClock } from '../../../common/clock.js';
import { parseModelRoute, type ModelRoute } from '../../../common/model-route.js';
import { systemSetTimer } from '../../../router/placement/balancer.js';
import { routesByPool, type ParsedRoutes } from '../../../router/discovery/kube-model-routes.js';
import { RouteTable } from '../../../router/routes/route-table.js';

const route = (name: string, pool: string, spec: Record<string, unknown>): ModelRoute => {
  const r = parseModelRoute({ apiVersion: 'modelmux.io/v1alpha1', kind: 'ModelRoute', metadata: { name }, spec: { deploymentRef: { name: pool }, ...spec } });
  if (!r.ok) throw new Error(r.message);
  return r.route;
};
const canary = (name: string, pool: string) =>
  route(name, pool, {
    split: {
      backends: [
        { model: 'v1', weight: 3 },
        { model: 'v2', weight: 1 },
      ],
    },
  });

function table(draws: number[] = []): RouteTable {
  let i = 0;
  const t = new RouteTable({ recentMs: 5000, tableLagMs: 2000, maxQueue: 8, connectionsPerReplica: 1 }, systemClock, () => draws[i++ % draws.length] ?? 0, systemSetTimer, silentLogger);
  return t;
}

describe('the route table’s ModelRoutes', () => {
  it('gives each prefix the routes of its pool: the prefix in static mode, namespace/name in kube mode', () => {
    const t = table();
    t.apply([
      { prefix: '/wine', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: [] },
      { prefix: '/beer', pool: 'ml/beer', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: [] },
    ]);
    t.applyModelRoutes(
      new Map([
        ['wine', [canary('wine-7', 'wine')]],
        ['ml/beer', [canary('ipa', 'beer')]],
        ['beer', [canary('stout', 'beer')]],
      ]),
    );
    expect(t.match('/wine')?.models.has('wine-7')).toBe(true);
    expect(t.match('/wine')?.models.has('ipa')).toBe(false);
    expect(t.match('/beer')?.models.has('ipa')).toBe(true);
    expect(t.match('/beer')?.models.has('stout')).toBe(false);
  });

  it('keeps the routes of a prefix that appears after them, and swaps the whole set on a change', () => {
    const t = table();
    t.applyModelRoutes(new Map([['wine', [canary('wine-7', 'wine')]]]));
    t.apply([{ prefix: '/wine', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: [] }]);
    const before = t.match('/wine')?.models;
    expect(before?.has('wine-7')).toBe(true);
    t.applyModelRoutes(new Map([['wine', [canary('wine-8', 'wine')]]]));
    expect(t.match('/wine')?.models.has('wine-7')).toBe(false);
    expect(t.match('/wine')?.models.has('wine-8')).toBe(true);
    // A request that took the old index still sees the old routes whole.
    expect(before?.has('wine-7')).toBe(true);
  });

  it('draws a split backend from the injected random source, and a sticky one from the raw header', () => {
    const t = table([0.1, 0.8]);
    t.apply([{ prefix: '/wine', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: [] }]);
    t.applyModelRoutes(new Map([['wine', [canary('wine-7', 'wine'), route('sticky', 'wine', { split: { stickyHeader: 'x-user-id', backends: [{ model: 'a' }, { model: 'b' }] } })]]]));
    const models = t.match('/wine')?.models;
    expect(models?.resolve('wine-7', [])).toMatchObject({ kind: 'model', model: 'v1', routes: ['wine-7'] });
    expect(models?.resolve('wine-7', [])).toMatchObject({ kind: 'model', model: 'v2' });
    const users = Array.from({ length: 50 }, (_, i) => `u${i}`);
    const first = users.map((u) => models?.resolve('sticky', ['X-User-Id', u]));
    const again = users.map((u) => models?.resolve('sticky', ['x-user-id', u]));
    expect(again).toEqual(first);
    expect(new Set(first.map((r) => (r?.kind === 'model' ? r.model : '')))).toEqual(new Set(['a', 'b']));
  });
});

describe('routesByPool (kube mode)', () => {
  it('keys each route by its namespace and deploymentRef, and skips one whose spec does not parse', () => {
    const obj = (ns: string, name: string, spec: unknown) => ({
      apiVersion: 'modelmux.io/v1alpha1',
      kind: 'ModelRoute',
      metadata: { name, namespace: ns, creationTimestamp: new Date('2026-01-01T00:00:00Z') },
      spec,
    });
    const ok = { deploymentRef: { name: 'wine' }, split: { backends: [{ model: 'a' }] } };
    const byPool = routesByPool([obj('ml', 'r1', ok), obj('dev', 'r2', ok), obj('ml', 'bad', { deploymentRef: { name: 'wine' } })], silentLogger);
    expect([...byPool].map(([k, rs]) => [k, rs.map((r) => r.metadata.name)])).toEqual([
      ['ml/wine', ['r1']],
      ['dev/wine', ['r2']],
    ]);
    expect(byPool.get('ml/wine')?.[0]?.metadata.creationTimestamp).toBe('2026-01-01T00:00:00.000Z');
  });

  it('parses only the routes whose resourceVersion changed, so the other pools keep their index', () => {
    const obj = (name: string, pool: string, rv: string, model = 'a') => ({
      apiVersion: 'modelmux.io/v1alpha1',
      kind: 'ModelRoute',
      metadata: { name, namespace: 'ml', resourceVersion: rv },
      spec: { deploymentRef: { name: pool }, split: { backends: [{ model }] } },
    });
    const parsed: ParsedRoutes = new Map();
    const first = routesByPool([obj('r1', 'wine', '1'), obj('r2', 'beer', '1')], silentLogger, parsed);
    const second = routesByPool([obj('r1', 'wine', '1'), obj('r2', 'beer', '2', 'b')], silentLogger, parsed);
    expect(second.get('ml/wine')?.[0]).toBe(first.get('ml/wine')?.[0]);
    expect(second.get('ml/beer')?.[0]).not.toBe(first.get('ml/beer')?.[0]);
    const t = table();
    t.apply([
      { prefix: '/wine', pool: 'ml/wine', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: [] },
      { prefix: '/beer', pool: 'ml/beer', maxOngoingRequests: 4, matchTimeoutMs: 1000, replicas: [] },
    ]);
    t.applyModelRoutes(first);
    const wine = t.match('/wine')?.models;
    const beer = t.match('/beer')?.models;
    t.applyModelRoutes(second);
    expect(t.match('/wine')?.models).toBe(wine);
    expect(t.match('/beer')?.models).not.toBe(beer);
    routesByPool([obj('r1', 'wine', '1')], silentLogger, parsed);
    expect([...parsed.keys()]).toEqual(['ml/r1']);
  });
});
