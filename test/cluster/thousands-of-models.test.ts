import { jest } from '@jest/globals';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api } from '@kubernetes/client-node';
import { MODELS_ANNOTATION } from '../../common/names.js';
import { REPLICA_PORT } from '../../common/replica-env.js';
import { parseTableAnnotation, TABLE_ANNOTATION_MAX_BYTES } from '../../common/table-annotation.js';
import { startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { acquireLoopbackAddress, releaseLoopbackAddress } from '../../harness/loopback-addresses.js';
import { replicaAccess, routerAccess, setPodStatus, unscheduledPod } from '../helpers/routed-pods.js';
import { startReplica, type ReplicaProcess } from '../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../harness/router-process.js';
import { wineModelFolder } from '../helpers/wine-folder.js';
import { get, post, v2Body, wineRows } from '../integration/replica/wine-fixtures.js';

jest.setTimeout(240_000);

const NS = 'default';
const MODELS = 3000;
/** 100 characters: the full list of 3,000 would be 309 KB, past the API server's 256 KiB for all annotations. */
const id = (i: number, prefix = 'wine'): string => `${prefix}-${String(i).padStart(5, '0')}-`.padEnd(100, 'abcdefghij');
const ids = Array.from({ length: MODELS }, (_, i) => id(i));
const later = Array.from({ length: 5 }, (_, i) => id(i, 'late'));

let cp: ControlPlane;
let dir: string;
const addresses: string[] = [];
const replicas: ReplicaProcess[] = [];
let router: RouterProcess | undefined;

/** Runs `fn` over `items`, `width` at a time. */
async function inParallel<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

const infer = (base: string, model: string) => post(`${base}/v2/models/${model}/infer`, v2Body(wineRows(1)));

beforeAll(async () => {
  [cp, dir] = await Promise.all([startControlPlane(), wineModelFolder('modelmux-thousands-', [...ids, ...later])]);
  await cp.kubectl(['apply', '-f', join(process.cwd(), 'crds/modelmux.io_multiplexeddeployments.yaml')]);
  await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
  await cp.kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [
        ...routerAccess(NS, 'router'),
        ...replicaAccess(NS, 'replica'),
        {
          apiVersion: 'modelmux.io/v1alpha1',
          kind: 'MultiplexedDeployment',
          metadata: { name: 'big', namespace: NS },
          spec: { routePrefix: '/big', modelSource: { uri: pathToFileURL(dir).href }, maxModelsPerReplica: 3200, maxOngoingRequests: 64 },
        },
        unscheduledPod('big-0', NS, 'big'),
        unscheduledPod('big-1', NS, 'big'),
      ],
    }),
  });
}, 300_000);

afterAll(async () => {
  await router?.stop();
  await Promise.all(replicas.map((r) => r.stop()));
  for (const a of addresses) releaseLoopbackAddress(a);
  await cp?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a replica holding thousands of models', () => {
  it('publishes a bounded annotation, and the router places every one of its models on it', async () => {
    const kubeconfig = await cp.serviceAccountKubeconfig(NS, 'replica');
    for (const [i, maxModels] of [3200, 3].entries()) {
      const host = acquireLoopbackAddress();
      addresses.push(host);
      replicas.push(
        await startReplica({
          host,
          args: ['--port', String(REPLICA_PORT), '--model-source', pathToFileURL(dir).href, '--max-models', String(maxModels), '--max-ongoing-requests', '64'],
          env: { KUBECONFIG: kubeconfig, POD_NAME: `big-${i}`, POD_NAMESPACE: NS },
        }),
      );
    }
    const [big, small] = replicas as [ReplicaProcess, ReplicaProcess];
    const [ip0, ip1] = addresses as [string, string];
    await setPodStatus(cp, NS, 'big-0', ip0, true);
    await setPodStatus(cp, NS, 'big-1', ip1, true);

    // The big replica loads all 3,000 (straight to it, not through the router).
    await inParallel(ids, 16, async (m) => expect((await infer(big.url, m)).status).toBe(200));
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    const annotationOf = async (name: string): Promise<string> => (await core.readNamespacedPod({ name, namespace: NS })).metadata?.annotations?.[MODELS_ANNOTATION] ?? '';
    const compact = await eventually(async () => {
      const raw = await annotationOf('big-0');
      const a = parseTableAnnotation(raw);
      if (a?.form !== 'compact' || a.summary.loadedCount !== MODELS) throw new Error(`not published yet: ${raw.slice(0, 200)}`);
      return { raw, summary: a.summary };
    }, 30_000);
    expect(Buffer.byteLength(compact.raw)).toBeLessThanOrEqual(TABLE_ANNOTATION_MAX_BYTES);
    expect(Buffer.byteLength(compact.raw)).toBeLessThan(16 * 1024);
    expect(ids.every((m) => compact.summary.filter.has(m))).toBe(true);
    expect(JSON.stringify((await get(`${big.url}/models`)).body.loaded).length).toBeGreaterThan(256 * 1024);

    router = await startRouter(['--discovery', 'kube'], { KUBECONFIG: await cp.serviceAccountKubeconfig(NS, 'router') });
    const rt = router;
    await eventually(async () => {
      const routes = (await get(`${rt.adminUrl}/routes`)).body.routes as { prefix: string; replicas: { name: string }[] }[];
      expect(
        routes
          .find((r) => r.prefix === '/big')
          ?.replicas.map((r) => r.name)
          .sort(),
      ).toEqual(['big-0', 'big-1']);
    });

    // Every tenth of the 3,000: the small replica has free slots and would get about half
    // of them if the router did not know where they are.
    const sample = ids.filter((_, i) => i % 10 === 3);
    await inParallel(sample, 8, async (m) => {
      const a = await infer(`${rt.url}/big`, m);
      expect(a.status).toBe(200);
      expect(a.headers.get('x-modelmux-replica')).toBe('big-0');
      expect(a.headers.get('x-modelmux-cache')).toBe('hit');
    });

    // Models loaded after the router started: the digest changes and the router fetches again.
    for (const m of later) expect((await infer(big.url, m)).status).toBe(200);
    await eventually(async () => {
      const a = parseTableAnnotation(await annotationOf('big-0'));
      if (a?.form !== 'compact' || a.summary.loadedCount !== MODELS + later.length) throw new Error('not published yet');
    }, 30_000);
    // The router reads the same watch and then one GET /models of 300 KB.
    await sleep(3000);
    for (const m of later) {
      const a = await infer(`${rt.url}/big`, m);
      expect(a.headers.get('x-modelmux-replica')).toBe('big-0');
      expect(a.headers.get('x-modelmux-cache')).toBe('hit');
    }
    expect((await small.metrics()).get('modelmux_replica_model_loads_total') ?? 0).toBe(0);
  });
});
