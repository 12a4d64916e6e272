import type { V1Pod } from '@kubernetes/client-node';
import { silentLogger } from '../../../common/log.js';
import type { ModelId } from '../../../common/model-id.js';
import { encodeTableAnnotation } from '../../../common/table-annotation.js';
import { podIsReady, routesFromObjects } from '../../../router/discovery/kube-discovery.js';

const spec = (routePrefix: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ routePrefix, modelSource: { uri: 's3://models/wine' }, ...extra });
const mxd = (name: string, s: unknown, namespace = 'ml') => ({ apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', metadata: { name, namespace }, spec: s });

function pod(name: string, deployment: string, ip: string, annotation?: string, ready = true, namespace = 'ml'): V1Pod {
  return {
    metadata: { name, namespace, labels: { 'modelmux.io/deployment': deployment }, ...(annotation === undefined ? {} : { annotations: { 'modelmux.io/models': annotation } }) },
    status: { phase: 'Running', podIP: ip, conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

describe('routesFromObjects', () => {
  it('turns a MultiplexedDeployment and its ready pods into a route with tables', () => {
    const table = JSON.stringify({ version: 3, loaded: ['m1'], loading: ['m2'], capacity: 3 });
    const routes = routesFromObjects(
      [mxd('wine', spec('/wine', { maxOngoingRequests: 4, matchTimeoutSeconds: 0.5 }))],
      [pod('wine-a', 'wine', '10.0.0.1', table), pod('wine-b', 'wine', '10.0.0.2', undefined, false), pod('beer-a', 'beer', '10.0.0.3', table)],
      silentLogger,
    );
    expect(routes).toEqual([
      {
        prefix: '/wine',
        pool: 'ml/wine',
        maxOngoingRequests: 4,
        matchTimeoutMs: 500,
        tableLagMs: 2000,
        replicas: [{ name: 'wine-a', url: 'http://10.0.0.1:8080', table: { version: 3, loaded: ['m1'], loading: ['m2'], capacity: 3 } }],
      },
    ]);
  });

  it('expects tables as old as the pool publishes them, and leaves a compact one to the fetcher', () => {
    const compact = encodeTableAnnotation({ version: 1, loaded: Array.from({ length: 300 }, (_, i) => `model-${i}-${'x'.repeat(40)}` as ModelId), loading: [], capacity: 300 });
    const routes = routesFromObjects([mxd('wine', spec('/wine', { tablePublishIntervalMs: 5000 }))], [pod('wine-a', 'wine', '10.0.0.1', compact)], silentLogger);
    expect(routes[0]?.tableLagMs).toBe(6000);
    expect(routes[0]?.replicas[0]?.table).toBeUndefined();
  });

  it('keeps a pod with a garbage or missing table annotation routable, without a table', () => {
    const garbage = ['{', 'null', '{"version":-1,"loaded":[],"loading":[],"capacity":1}', '{"version":1,"loaded":["../x"],"loading":[],"capacity":1}', '[]'];
    const pods = garbage.map((g, i) => pod(`p${i}`, 'wine', `10.0.0.${i + 1}`, g));
    pods.push(pod('none', 'wine', '10.0.1.1'));
    const routes = routesFromObjects([mxd('wine', spec('/wine'))], pods, silentLogger);
    expect(routes[0]?.replicas).toHaveLength(garbage.length + 1);
    for (const r of routes[0]?.replicas ?? []) expect(r.table).toBeUndefined();
  });

  it('skips a resource with an invalid spec and the second claimant of a prefix', () => {
    const routes = routesFromObjects([mxd('bad', { routePrefix: 'no-slash' }), mxd('b-wine', spec('/wine')), mxd('a-wine', spec('/wine')), mxd('x', 'garbage')], [], silentLogger);
    expect(routes.map((r) => r.prefix)).toEqual(['/wine']);
    expect(routes).toHaveLength(1);
  });

  it('treats terminating, pending and IP-less pods as not ready', () => {
    const p = pod('a', 'wine', '10.0.0.1');
    expect(podIsReady(p)).toBe(true);
    expect(podIsReady({ ...p, metadata: { ...p.metadata, deletionTimestamp: new Date() } })).toBe(false);
    expect(podIsReady({ ...p, status: { ...p.status, phase: 'Pending' } })).toBe(false);
    expect(podIsReady({ ...p, status: { ...p.status, podIP: '' } })).toBe(false);
  });
});
