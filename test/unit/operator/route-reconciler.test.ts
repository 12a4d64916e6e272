import type { ModelRouteStatus } from '../../../common/model-route.js';
import type { ObjectReader } from '../../../operator/caches.js';
import { reconcileRoutes } from '../../../operator/route-reconciler.js';
import type { StoredRoute } from '../../../operator/route-status.js';

const NOW = new Date('2026-12-05T01:00:00Z');
const stored = (name: string, pool: string, status?: ModelRouteStatus): StoredRoute => ({
  metadata: { name, namespace: 'ml', generation: 1 },
  spec: { deploymentRef: { name: pool }, split: { backends: [{ model: 'a' }] } },
  ...(status !== undefined ? { status } : {}),
});

function cache(routes: StoredRoute[], pools: string[]): ObjectReader {
  return {
    modelRoutes: () => routes,
    multiplexedDeployments: () => [],
    owned: () => undefined,
    multiplexedDeployment: (_ns, name) => (pools.includes(name) ? ({} as ReturnType<ObjectReader['multiplexedDeployment']>) : undefined),
    deployment: () => undefined,
    horizontalPodAutoscaler: () => undefined,
    replicaPods: () => [],
  };
}

describe('reconcileRoutes', () => {
  it('writes the status of each route whose status is out of date, and only those', async () => {
    const writes: [string, string, ModelRouteStatus][] = [];
    const writer = {
      patchRouteStatus: (ns: string, name: string, status: ModelRouteStatus): Promise<void> => {
        writes.push([ns, name, status]);
        return Promise.resolve();
      },
    };
    await reconcileRoutes({ cache: cache([stored('r1', 'wine'), stored('r2', 'beer')], ['wine']), writer, now: () => NOW }, 'ml');
    expect(writes.map(([ns, name, s]) => [ns, name, s.conditions?.find((c) => c.type === 'ResolvedRefs')?.reason])).toEqual([
      ['ml', 'r1', 'ResolvedRefs'],
      ['ml', 'r2', 'PoolNotFound'],
    ]);
    const [, , r1] = writes[0] as [string, string, ModelRouteStatus];
    const [, , r2] = writes[1] as [string, string, ModelRouteStatus];
    writes.length = 0;
    // Written already: nothing to do. The pool beer appears: only r2 changes.
    await reconcileRoutes({ cache: cache([stored('r1', 'wine', r1), stored('r2', 'beer', r2)], ['wine', 'beer']), writer, now: () => new Date(NOW.getTime() + 1000) }, 'ml');
    expect(writes.map(([, name]) => name)).toEqual(['r2']);
  });
});
