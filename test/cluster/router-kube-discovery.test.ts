import { jest } from '@jest/globals';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MODELS_ANNOTATION } from '../../common/names.js';
import { REPLICA_PORT } from '../../common/replica-env.js';
import { freePorts } from '../../cli/local-processes.js';
import { startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { acquireLoopbackAddress, releaseLoopbackAddress } from '../../harness/loopback-addresses.js';
import { routerAccess, setPodStatus as setRoutedPodStatus, unscheduledPod } from '../helpers/routed-pods.js';
import { spawnModelmux, waitListeningAndReady } from '../../harness/modelmux-process.js';
import { startReplica, type ReplicaProcess } from '../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../harness/router-process.js';
import { get, post, v2Body, wineRows } from '../integration/replica/wine-fixtures.js';
import { wineModelFolder } from '../helpers/wine-folder.js';

jest.setTimeout(300_000);

const NS = 'default';
let cp: ControlPlane;
let dir: string;
const addresses: string[] = [];
const replicas: ReplicaProcess[] = [];
let router: RouterProcess | undefined;

/** A pod object whose status the test writes, with this table annotation. */
const pod = (name: string, annotation: string): unknown => unscheduledPod(name, NS, 'wine', { [MODELS_ANNOTATION]: annotation });
const setPodStatus = (name: string, ip: string, ready: boolean): Promise<void> => setRoutedPodStatus(cp, NS, name, ip, ready);

const routeReplicas = async (rt: RouterProcess): Promise<string[]> => {
  const routes = (await get(`${rt.adminUrl}/routes`)).body.routes as { prefix: string; replicas: { name: string }[] }[];
  return (routes.find((r) => r.prefix === '/wine')?.replicas.map((r) => r.name) ?? []).sort();
};

beforeAll(async () => {
  cp = await startControlPlane();
  dir = await wineModelFolder('modelmux-router-kube-', ['a', 'b']);
  await cp.kubectl(['apply', '-f', join(process.cwd(), 'crds/modelmux.io_multiplexeddeployments.yaml')]);
  await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
  await cp.kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [
        ...routerAccess(NS, 'router'),
        {
          apiVersion: 'modelmux.io/v1alpha1',
          kind: 'MultiplexedDeployment',
          metadata: { name: 'wine', namespace: NS },
          spec: { routePrefix: '/wine', modelSource: { uri: pathToFileURL(dir).href }, maxOngoingRequests: 8 },
        },
        pod('wine-0', '{"version": garbage'),
        pod('wine-1', JSON.stringify({ version: 1, loaded: ['a'], loading: [], capacity: 3 })),
      ],
    }),
  });
}, 600_000);

afterAll(async () => {
  await router?.stop();
  await Promise.all(replicas.map((r) => r.stop()));
  for (const a of addresses) releaseLoopbackAddress(a);
  await cp?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('router with Kubernetes discovery', () => {
  it('routes to the ready pods of a MultiplexedDeployment by their tables, survives garbage annotations and an API server restart', async () => {
    for (let i = 0; i < 2; i++) {
      const host = acquireLoopbackAddress();
      addresses.push(host);
      replicas.push(await startReplica({ host, args: ['--port', String(REPLICA_PORT), '--model-source', pathToFileURL(dir).href] }));
    }
    const [first, second] = replicas as [ReplicaProcess, ReplicaProcess];
    const [ip0, ip1] = addresses as [string, string];
    // The table on wine-1 says it holds "a": make it true.
    expect((await post(`${second.url}/v2/models/a/infer`, v2Body(wineRows(1)))).status).toBe(200);
    await setPodStatus('wine-0', ip0, true);
    await setPodStatus('wine-1', ip1, true);

    const kubeconfig = await cp.serviceAccountKubeconfig(NS, 'router');
    router = await startRouter(['--discovery', 'kube'], { KUBECONFIG: kubeconfig });
    const rt = router;
    await eventually(async () => expect(await routeReplicas(rt)).toEqual(['wine-0', 'wine-1']));

    for (let i = 0; i < 6; i++) {
      const a = await post(`${rt.url}/wine/v2/models/a/infer`, v2Body(wineRows(1)));
      expect(a.status).toBe(200);
      expect(a.headers.get('x-modelmux-replica')).toBe(`${ip1}:${REPLICA_PORT}`);
    }
    // Requests without a model id reach the pod whose annotation is garbage too.
    const seen = new Set<string | null>();
    for (let i = 0; i < 30; i++) {
      const r = await fetch(`${rt.url}/wine/v2/health/live`);
      expect(r.status).toBe(200);
      seen.add(r.headers.get('x-modelmux-replica'));
    }
    expect(seen).toEqual(new Set([`${ip0}:${REPLICA_PORT}`, `${ip1}:${REPLICA_PORT}`]));

    // The watches die with the API server and come back: later changes still arrive.
    await cp.restartApiServer();
    await setPodStatus('wine-1', ip1, false);
    await eventually(async () => expect(await routeReplicas(rt)).toEqual(['wine-0']), 60_000);
    const after = await post(`${rt.url}/wine/v2/models/a/infer`, v2Body(wineRows(1)));
    expect(after.status).toBe(200);
    expect(after.headers.get('x-modelmux-replica')).toBe(`${ip0}:${REPLICA_PORT}`);
    expect(first.url).toContain(ip0);
  });

  it('stays up and unready while the API server cannot be reached at start, then routes once it can', async () => {
    // The router's kubeconfig points at a port where nothing listens yet; later a plain TCP
    // relay to the real API server opens there (same address, so TLS still verifies).
    const [relayPort, routerPort] = (await freePorts(2)) as [number, number];
    const saKubeconfig = await readFile(await cp.serviceAccountKubeconfig(NS, 'router'), 'utf8');
    expect(saKubeconfig).toContain(cp.server);
    const late = join(dir, 'late-kubeconfig');
    await writeFile(late, saKubeconfig.replaceAll(cp.server, `https://127.0.0.1:${relayPort}`));
    const p = spawnModelmux('router', ['--host', '127.0.0.1', '--port', String(routerPort), '--grpc-port', '0', '--admin-port', '0', '--discovery', 'kube'], { KUBECONFIG: late });
    let relay: Server | undefined;
    try {
      await eventually(() => expect(p.logLines().some((l) => l['msg'] === 'watch failed; restarting')).toBe(true));
      for (let i = 0; i < 3; i++) {
        const ready = await fetch(`http://127.0.0.1:${routerPort}/readyz`);
        expect(ready.status).toBe(503);
        expect(p.exitCode()).toBeUndefined();
        await new Promise((r) => setTimeout(r, 1000));
      }
      const api = new URL(cp.server);
      relay = createServer((client) => {
        const upstream = connect(Number(api.port), api.hostname);
        client.pipe(upstream).pipe(client);
        client.on('error', () => upstream.destroy());
        upstream.on('error', () => client.destroy());
      });
      await new Promise<void>((resolve) => relay?.listen(relayPort, '127.0.0.1', resolve));
      const { url } = await waitListeningAndReady(p, 'router', (l) => l['msg'] === 'router listening', '127.0.0.1', '/readyz', 60_000);
      const adminPort = p.logLines().find((l) => l['msg'] === 'router listening')?.['adminPort'];
      const routes = (await get(`http://127.0.0.1:${String(adminPort)}/routes`)).body.routes as { prefix: string; replicas: unknown[] }[];
      expect(routes.map((r) => r.prefix)).toEqual(['/wine']);
      expect((await fetch(`${url}/wine/v2/health/live`)).status).toBe(200);
    } finally {
      await p.stop();
      relay?.close();
    }
  });
});
