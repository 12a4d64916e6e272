import { jest } from '@jest/globals';
import { rm } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import type { ModelRouteStatus, RouteCondition } from '../../common/model-route.js';
import { MODELS_ANNOTATION } from '../../common/names.js';
import { REPLICA_PORT } from '../../common/replica-env.js';
import { KubectlError, startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { getJson } from '../../harness/kube-json.js';
import { acquireLoopbackAddress, releaseLoopbackAddress } from '../../harness/loopback-addresses.js';
import { startOperator, type OperatorProcess } from '../../harness/operator-process.js';
import { operatorRbac } from '../helpers/operator-rbac.js';
import { routerAccess, setPodStatus, unscheduledPod } from '../helpers/routed-pods.js';
import { startReplica, type ReplicaProcess } from '../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../harness/router-process.js';
import { wineModelFolder } from '../helpers/wine-folder.js';
import { expectClose, expected, post, v2Body, v2Outputs, wineRows } from '../integration/replica/wine-fixtures.js';

// ModelRoutes in a real control plane: the generated CRD refuses what its CEL rules express at
// admission, the operator (with exactly its chart RBAC) writes each route's conditions, and a
// router in kube mode (with exactly its chart RBAC) follows a weight change within seconds.

jest.setTimeout(300_000);

const NS = 'default';
const OPERATOR_NS = 'modelmux-system';
let cp: ControlPlane;
let operator: OperatorProcess | undefined;
let replica: ReplicaProcess | undefined;
let router: RouterProcess | undefined;
let address: string | undefined;
let dir: string;

const route = (name: string, spec: Record<string, unknown>): string => JSON.stringify({ apiVersion: 'modelmux.io/v1alpha1', kind: 'ModelRoute', metadata: { name, namespace: NS }, spec });
const split = (pool: string, backends: [string, number][], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  deploymentRef: { name: pool },
  split: { backends: backends.map(([model, weight]) => ({ model, weight })) },
  ...extra,
});
const apply = (json: string): Promise<string> => cp.kubectl(['apply', '-f', '-'], { input: json });

async function refusal(json: string): Promise<string> {
  const err = await apply(json).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KubectlError);
  return (err as KubectlError).stderr;
}

const conditionOf = async (name: string, type: string): Promise<RouteCondition | undefined> =>
  (await getJson<{ status?: ModelRouteStatus }>(cp, ['modelroute', name, '-n', NS]))?.status?.conditions?.find((c) => c.type === type);

async function expectCondition(name: string, type: string, status: string, reason: string): Promise<void> {
  await eventually(async () => expect(await conditionOf(name, type)).toMatchObject({ status, reason }), 30_000);
}

beforeAll(async () => {
  cp = await startControlPlane();
  dir = await wineModelFolder('modelmux-routes-kube-', ['a', 'b']);
  await cp.kubectl(['apply', '-f', 'crds/']);
  await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', 'crd/modelroutes.modelmux.io', '--timeout=60s']);
  await apply(operatorRbac(OPERATOR_NS));
  await apply(JSON.stringify({ apiVersion: 'v1', kind: 'List', items: routerAccess(NS, 'router') }));
  // replicas: 0, so no pod waits for a scheduler: the test runs the replica and writes its pod.
  await apply(
    JSON.stringify({
      apiVersion: 'modelmux.io/v1alpha1',
      kind: 'MultiplexedDeployment',
      metadata: { name: 'wine', namespace: NS },
      spec: { replicas: 0, routePrefix: '/wine', modelSource: { uri: pathToFileURL(dir).href } },
    }),
  );
  operator = await startOperator(await cp.serviceAccountKubeconfig(OPERATOR_NS, 'modelmux-operator'), ['--leader-election-namespace', OPERATOR_NS]);
}, 600_000);

afterAll(async () => {
  await router?.stop();
  await replica?.stop();
  await operator?.stop();
  if (address !== undefined) releaseLoopbackAddress(address);
  await cp?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('ModelRoutes in a cluster', () => {
  it('refuses at admission what the CEL rules of the CRD express', async () => {
    expect(await refusal(route('two-kinds', { ...split('wine', [['a', 1]]), sequence: { steps: [{ model: 'a' }, { model: 'b' }] } }))).toContain(
      'exactly one of split, ensemble or sequence must be set',
    );
    expect(await refusal(route('no-kind', { deploymentRef: { name: 'wine' } }))).toContain('exactly one of split, ensemble or sequence must be set');
    expect(
      await refusal(
        route(
          'zero',
          split('wine', [
            ['a', 0],
            ['b', 0],
          ]),
        ),
      ),
    ).toContain('backend weights must sum to more than 0');
    expect(await refusal(route('quorum', { deploymentRef: { name: 'wine' }, ensemble: { members: [{ model: 'a' }, { model: 'b' }], combine: 'vote', quorum: 3 } }))).toContain(
      'quorum must not exceed the number of members',
    );
    expect(await refusal(route('climb', split('wine', [['a..b', 1]])))).toContain('may not contain');
    expect(await getJson(cp, ['modelroute', 'zero', '-n', NS])).toBeUndefined();
  });

  it('has the operator set Accepted and ResolvedRefs on every route, as its RBAC allows', async () => {
    await apply(
      route(
        'wine-7',
        split('wine', [
          ['a', 90],
          ['b', 10],
        ]),
      ),
    );
    await apply(route('loop-a', split('wine', [['loop-b', 1]])));
    await apply(route('loop-b', split('wine', [['loop-a', 1]])));
    await apply(route('beer-7', split('beer', [['a', 1]])));
    await expectCondition('wine-7', 'Accepted', 'True', 'Accepted');
    await expectCondition('wine-7', 'ResolvedRefs', 'True', 'ResolvedRefs');
    await expectCondition('loop-a', 'ResolvedRefs', 'False', 'RefCycle');
    await expectCondition('loop-b', 'ResolvedRefs', 'False', 'RefCycle');
    await expectCondition('beer-7', 'ResolvedRefs', 'False', 'PoolNotFound');
    // A second route claiming wine-7's public name loses it: the older one keeps serving.
    await apply(route('wine-7-copy', split('wine', [['b', 1]], { model: 'wine-7' })));
    await expectCondition('wine-7-copy', 'Accepted', 'False', 'NameConflict');
    expect((await conditionOf('wine-7', 'Accepted'))?.status).toBe('True');
    // Breaking the cycle resolves both routes.
    await apply(route('loop-b', split('wine', [['a', 1]])));
    await expectCondition('loop-a', 'ResolvedRefs', 'True', 'ResolvedRefs');
    const table = await cp.kubectl(['get', 'mroute', '-n', NS]);
    expect(table).toMatch(/NAME\s+POOL\s+KIND\s+BACKENDS\s+ACCEPTED\s+AGE/);
    expect(table).toMatch(/wine-7\s+wine\s+split\s+a 90%, b 10%\s+True/);
  });

  it('has a router in kube mode follow a weight change within seconds', async () => {
    address = acquireLoopbackAddress();
    replica = await startReplica({ host: address, args: ['--port', String(REPLICA_PORT), '--model-source', pathToFileURL(dir).href] });
    await apply(JSON.stringify(unscheduledPod('wine-0', NS, 'wine', { [MODELS_ANNOTATION]: JSON.stringify({ version: 1, loaded: [], loading: [], capacity: 3 }) })));
    await setPodStatus(cp, NS, 'wine-0', address, true);
    router = await startRouter(['--discovery', 'kube', '--namespace', NS], { KUBECONFIG: await cp.serviceAccountKubeconfig(NS, 'router') });
    const rt = router;
    const rows = wineRows(2);
    const backendOf = async (): Promise<string> => {
      const a = await post(`${rt.url}/wine/v2/models/wine-7/infer`, v2Body(rows));
      expect(a.status).toBe(200);
      const backend = a.headers.get('x-modelmux-backend') ?? '';
      expectClose(v2Outputs(a), expected(backend, rows));
      return backend;
    };
    await eventually(async () => expect(['a', 'b']).toContain(await backendOf()), 30_000);
    const before = new Set<string>();
    for (let i = 0; i < 100; i++) before.add(await backendOf());
    expect(before).toEqual(new Set(['a', 'b']));

    const changed = Date.now();
    await cp.kubectl([
      'patch',
      'modelroute',
      'wine-7',
      '-n',
      NS,
      '--type=merge',
      '-p',
      JSON.stringify({
        spec: {
          split: {
            backends: [
              { model: 'a', weight: 0 },
              { model: 'b', weight: 1 },
            ],
          },
        },
      }),
    ]);
    await eventually(
      async () => {
        for (let i = 0; i < 20; i++) expect(await backendOf()).toBe('b');
      },
      10_000,
      100,
    );
    const followedMs = Date.now() - changed;
    expect(followedMs).toBeLessThan(10_000);
    process.stdout.write(`router followed the weight change in ${followedMs} ms\n`);

    // The route that lost the name conflict takes the name once the older one is deleted.
    await cp.kubectl(['delete', 'modelroute', 'wine-7', '-n', NS]);
    await expectCondition('wine-7-copy', 'Accepted', 'True', 'Accepted');
    // With no route left for it, wine-7 is a plain model name again, which the store lacks.
    await cp.kubectl(['delete', 'modelroute', 'wine-7-copy', '-n', NS]);
    await eventually(async () => expect((await post(`${rt.url}/wine/v2/models/wine-7/infer`, v2Body(rows))).body).toMatchObject({ error: 'model_not_found' }), 10_000, 100);
  });
});
