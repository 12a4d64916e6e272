import { computeRouteStatuses, routeStatusChanged, type StoredRoute } from '../../../operator/route-status.js';

const NOW = new Date('2026-12-05T01:00:00Z');
const stored = (name: string, spec: unknown, extra: Partial<StoredRoute> = {}, created = '2026-12-01T00:00:00Z'): StoredRoute => ({
  metadata: { name, namespace: 'ml', generation: 2, creationTimestamp: created },
  spec,
  ...extra,
});
const split = (pool: string, ...models: string[]) => ({ deploymentRef: { name: pool }, split: { backends: models.map((model) => ({ model })) } });
const cond = (s: ReturnType<typeof computeRouteStatuses>, name: string, type: string) => s.get(name)?.conditions?.find((c) => c.type === type);

describe('computeRouteStatuses', () => {
  const pools = (p: string): boolean => p === 'wine';

  it('accepts a valid route of an existing pool, with the Kind and Backends columns', () => {
    const s = computeRouteStatuses([stored('wine-7', split('wine', 'wine-7@1', 'wine-7@2'))], pools, NOW);
    expect(s.get('wine-7')).toMatchObject({ observedGeneration: 2, kind: 'split', backends: 'wine-7@1 50%, wine-7@2 50%' });
    expect(cond(s, 'wine-7', 'Accepted')).toMatchObject({ status: 'True', reason: 'Accepted', observedGeneration: 2, lastTransitionTime: NOW.toISOString() });
    expect(cond(s, 'wine-7', 'ResolvedRefs')).toMatchObject({ status: 'True', reason: 'ResolvedRefs' });
  });

  it('says PoolNotFound for a route of a pool that does not exist', () => {
    const s = computeRouteStatuses([stored('r', split('beer', 'm'))], pools, NOW);
    expect(cond(s, 'r', 'Accepted')?.status).toBe('True');
    expect(cond(s, 'r', 'ResolvedRefs')).toMatchObject({ status: 'False', reason: 'PoolNotFound' });
  });

  it('says RefCycle for routes that refer to each other, in the same pool only', () => {
    const s = computeRouteStatuses([stored('a', split('wine', 'b')), stored('b', split('wine', 'a')), stored('c', split('beer', 'a'))], () => true, NOW);
    expect(cond(s, 'a', 'ResolvedRefs')).toMatchObject({ status: 'False', reason: 'RefCycle' });
    expect(cond(s, 'b', 'ResolvedRefs')).toMatchObject({ status: 'False', reason: 'RefCycle' });
    expect(cond(s, 'c', 'ResolvedRefs')?.status).toBe('True');
  });

  it('refuses the younger of two routes claiming one public name in a pool', () => {
    const s = computeRouteStatuses(
      [stored('a-younger', { ...split('wine', 'b'), model: 'shared' }, {}, '2026-12-02T00:00:00Z'), stored('old', { ...split('wine', 'a'), model: 'shared' })],
      pools,
      NOW,
    );
    expect(cond(s, 'old', 'Accepted')?.status).toBe('True');
    expect(cond(s, 'a-younger', 'Accepted')).toMatchObject({ status: 'False', reason: 'NameConflict' });
  });

  it('refuses a spec the schema refuses (admission bypassed), naming the field', () => {
    const s = computeRouteStatuses([stored('bad', { deploymentRef: { name: 'wine' }, split: { backends: [{ model: 'a', weight: 0 }] } })], pools, NOW);
    expect(cond(s, 'bad', 'Accepted')).toMatchObject({ status: 'False', reason: 'Invalid' });
    expect(cond(s, 'bad', 'Accepted')?.message).toContain('weights must sum to more than 0');
  });

  it('keeps lastTransitionTime while a condition keeps its status, so an unchanged status is not written', () => {
    const first = computeRouteStatuses([stored('r', split('wine', 'm'))], pools, NOW).get('r') as NonNullable<StoredRoute['status']>;
    const again = computeRouteStatuses([stored('r', split('wine', 'm'), { status: first })], pools, new Date(NOW.getTime() + 60_000)).get('r');
    expect(again).toEqual(first);
    expect(routeStatusChanged(first, again as NonNullable<typeof again>)).toBe(false);
    const moved = computeRouteStatuses([stored('r', split('beer', 'm'), { status: first })], pools, new Date(NOW.getTime() + 60_000)).get('r');
    expect(routeStatusChanged(first, moved as NonNullable<typeof moved>)).toBe(true);
  });
});
