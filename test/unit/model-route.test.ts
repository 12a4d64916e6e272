import { parse } from 'yaml';
import { readFileSync } from 'node:fs';
import { RouteIndex } from '../../common/route-index.js';
import { MAX_ROUTE_DEPTH, modelRouteSpecSchema, parseModelRoute, routeSummary, type ModelRoute, type ModelRouteSpecInput } from '../../common/model-route.js';

const route = (name: string, spec: ModelRouteSpecInput, creationTimestamp?: string): ModelRoute => {
  const r = parseModelRoute({ apiVersion: 'modelmux.io/v1alpha1', kind: 'ModelRoute', metadata: { name, ...(creationTimestamp ? { creationTimestamp } : {}) }, spec });
  if (!r.ok) throw new Error(r.message);
  return r.route;
};
const split = (...backends: [string, number][]): ModelRouteSpecInput => ({ deploymentRef: { name: 'wine' }, split: { backends: backends.map(([model, weight]) => ({ model, weight })) } });
const first = (s: { backends: { model: string }[] }): string => s.backends[0]?.model ?? '';

describe('the ModelRoute schema', () => {
  it('accepts the canary of the issue and fills the defaults', () => {
    const spec = modelRouteSpecSchema.parse({
      deploymentRef: { name: 'wine' },
      model: 'wine-7',
      split: { backends: [{ model: 'wine-7@1', weight: 90 }, { model: 'wine-7@2' }], stickyHeader: 'x-user-id', mirror: { model: 'wine-7@3', percent: 5 } },
    });
    expect(spec.split?.backends.map((b) => b.weight)).toEqual([90, 1]);
  });

  it.each([
    ['none of split, ensemble, sequence', { deploymentRef: { name: 'wine' } }, 'exactly one of split'],
    ['two of them', { ...split(['a', 1]), sequence: { steps: [{ model: 'a' }, { model: 'b' }] } }, 'exactly one of split'],
    ['weights summing to 0', split(['a', 0], ['b', 0]), 'weights must sum to more than 0'],
    ['a negative weight', split(['a', -1]), '>=0'],
    ['17 backends', { deploymentRef: { name: 'wine' }, split: { backends: Array.from({ length: 17 }, (_, i) => ({ model: `m${i}` })) } }, '<=16'],
    ['a quorum above the members', { deploymentRef: { name: 'wine' }, ensemble: { members: [{ model: 'a' }, { model: 'b' }], combine: 'mean', quorum: 3 } }, 'quorum must not exceed'],
    ['a one-step sequence', { deploymentRef: { name: 'wine' }, sequence: { steps: [{ model: 'a' }] } }, '>=2'],
    ['a model id with ".." in it', split(['a..b', 1]), 'may not contain'],
    ['an unknown field', { ...split(['a', 1]), weights: 3 }, 'Unrecognized key'],
  ])('refuses %s', (_what, spec, message) => {
    const r = modelRouteSpecSchema.safeParse(spec);
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain(message);
  });

  it('parses the example objects in examples/', () => {
    const docs = readFileSync('examples/wine-modelroutes.yaml', 'utf8')
      .split(/^---$/m)
      .map((d) => parse(d) as unknown)
      .filter((d) => d !== null);
    expect(docs.length).toBeGreaterThanOrEqual(3);
    for (const d of docs) expect(parseModelRoute(d)).toMatchObject({ ok: true });
  });

  it('routes a route whatever its status holds: the status is the operator’s, never read to route', () => {
    const r = parseModelRoute({
      apiVersion: 'modelmux.io/v1alpha1',
      kind: 'ModelRoute',
      metadata: { name: 'r' },
      spec: split(['a', 1]),
      status: { conditions: [{ type: 'Programmed', status: 'Maybe' }] },
    });
    expect(r).toMatchObject({ ok: true, route: { spec: { split: { backends: [{ model: 'a', weight: 1 }] } } } });
  });

  it('summarises a split with its shares for the Backends column', () => {
    expect(
      routeSummary(
        route('r', {
          ...split(['a', 9], ['b', 1]),
          split: {
            backends: [
              { model: 'a', weight: 9 },
              { model: 'b', weight: 1 },
            ],
            mirror: { model: 'c', percent: 5 },
          },
        }).spec,
      ),
    ).toBe('a 90%, b 10%, mirror c 5%');
  });
});

describe('RouteIndex', () => {
  it('resolves a split, a route of routes, and a name that is no route to itself', () => {
    const index = RouteIndex.build([route('outer', split(['inner', 1])), route('inner', split(['m@2', 1]))]);
    expect(index.resolve('outer', first)).toEqual({ kind: 'model', model: 'm@2', routes: ['outer', 'inner'], mirrors: [] });
    expect(index.resolve('plain', first)).toEqual({ kind: 'model', model: 'plain', routes: [], mirrors: [] });
  });

  it('returns ensembles and sequences for their server, after any split leading to them', () => {
    const index = RouteIndex.build([route('canary', split(['avg', 1])), route('avg', { deploymentRef: { name: 'wine' }, ensemble: { members: [{ model: 'a' }, { model: 'b' }], combine: 'mean' } })]);
    const r = index.resolve('canary', first);
    expect(r.kind).toBe('ensemble');
    expect(r.routes).toEqual(['canary', 'avg']);
  });

  it('refuses every route on or leading into a cycle, and leaves the others alone', () => {
    const index = RouteIndex.build([
      route('a', split(['b', 1])),
      route('b', split(['c', 1], ['m', 1])),
      route('c', { deploymentRef: { name: 'wine' }, sequence: { steps: [{ model: 'x' }, { model: 'a' }] } }),
      route('lead', split(['a', 1])),
      route('fine', split(['m', 1])),
      route('self', { deploymentRef: { name: 'wine' }, split: { backends: [{ model: 'm' }], mirror: { model: 'self', percent: 1 } } }),
    ]);
    for (const n of ['a', 'b', 'c', 'lead', 'self']) expect([n, index.get(n)?.problem?.reason]).toEqual([n, 'RefCycle']);
    expect(index.get('fine')?.problem).toBeUndefined();
    expect(index.resolve('lead', first)).toMatchObject({ kind: 'refused', problem: { reason: 'RefCycle' } });
  });

  it(`refuses a chain deeper than ${MAX_ROUTE_DEPTH} routes and serves one exactly that deep`, () => {
    const chain = (n: number, tag: string): ModelRoute[] => Array.from({ length: n }, (_, i) => route(`${tag}${i}`, split([i === n - 1 ? 'model' : `${tag}${i + 1}`, 1])));
    const ok = RouteIndex.build(chain(MAX_ROUTE_DEPTH, 'ok'));
    expect(ok.resolve('ok0', first)).toMatchObject({ kind: 'model', model: 'model' });
    const deep = RouteIndex.build(chain(MAX_ROUTE_DEPTH + 1, 'deep'));
    expect(deep.resolve('deep0', first)).toMatchObject({ kind: 'refused', problem: { reason: 'DepthExceeded' } });
    expect(deep.get('deep1')?.problem).toBeUndefined();
  });

  it('handles a chain of 20,000 routes without overflowing the stack', () => {
    const n = 20_000;
    const routes = Array.from({ length: n }, (_, i) => route(`r${i}`, split([i === n - 1 ? 'r0' : `r${i + 1}`, 1])));
    const index = RouteIndex.build(routes);
    expect(index.get('r12345')?.problem?.reason).toBe('RefCycle');
  });

  it('gives a contested public name to the older route; the younger one reports the conflict', () => {
    const older = route('wine-7-v1', { ...split(['a', 1]), model: 'wine-7' }, '2026-01-01T00:00:00Z');
    const younger = route('wine-7-v2', { ...split(['b', 1]), model: 'wine-7' }, '2026-02-01T00:00:00Z');
    const index = RouteIndex.build([younger, older]);
    expect(index.get('wine-7')?.route.metadata.name).toBe('wine-7-v1');
    expect(index.entryOf('wine-7-v2')?.problem).toMatchObject({ reason: 'NameConflict' });
  });
});
