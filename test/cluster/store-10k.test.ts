import { jest } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../helpers/control-plane.js';
import { eventually } from '../helpers/eventually.js';
import { getItems } from '../helpers/kube-json.js';
import { WINE_INPUT } from '../../common/wine-model.js';
import { bucketListings, FLEET_SIZE, FLEET_WIDTHS, fleetId, fleetSample, fleetWidth, uploadFleet, wrongAnswers } from '../helpers/model-fleet.js';
import { parsePrometheus } from '../helpers/modelmux-process.js';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent.js';
import { startOperator, type OperatorProcess } from '../helpers/operator-process.js';
import { startRouter, type RouterProcess } from '../helpers/router-process.js';
import { startS3Server, type S3Server } from '../helpers/s3-server.js';

// Issue 37 in a real control plane: the 10,000-model bucket served by a MultiplexedDeployment
// whose replica pods the operator makes and the node agent runs, behind a router with kube
// discovery. A sample over the ids and every graph answers right, and no request lists the bucket.

jest.setTimeout(300_000);

const PREFIX = 'fleet';

const manifest = (s3: S3Server): string => `apiVersion: modelmux.io/v1alpha1
kind: MultiplexedDeployment
metadata: { name: fleet, namespace: default }
spec:
  replicas: 2
  routePrefix: /fleet
  modelSource: { uri: "s3://${s3.bucket}/${PREFIX}", endpoint: "${s3.endpoint}", credentialsSecret: s3-creds }
  maxModelsPerReplica: 100
`;

/** Successful loads over the pool's replica pods, read from their own metrics. */
async function successfulLoads(cp: ControlPlane): Promise<number> {
  let n = 0;
  for (const pod of await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=fleet'])) {
    n += parsePrometheus(await (await fetch(`http://${pod.status?.podIP ?? ''}:8080/metrics`)).text()).get('modelmux_replica_model_loads_total{result="success"}') ?? 0;
  }
  return n;
}

const isReady = (p: V1Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

describe('a store of 10,000 models of five graphs, served by a MultiplexedDeployment', () => {
  let cp: ControlPlane;
  let s3: S3Server;
  let agent: NodeAgent;
  let operator: OperatorProcess;
  let router: RouterProcess;

  beforeAll(async () => {
    [cp, s3] = await Promise.all([startControlPlane(), startS3Server({ metrics: true })]);
    const ms = await uploadFleet(s3, PREFIX);
    process.stdout.write(`uploaded ${FLEET_SIZE} models in ${ms} ms\n`);
    await cp.kubectl(['apply', '-f', 'crds/']);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
    await cp.kubectl(['create', 'secret', 'generic', 's3-creds', `--from-literal=AWS_ACCESS_KEY_ID=${s3.accessKeyId}`, `--from-literal=AWS_SECRET_ACCESS_KEY=${s3.secretAccessKey}`]);
    agent = await startNodeAgent(cp);
    operator = await startOperator(cp.kubeconfigPath);
    router = await startRouter(['--discovery', 'kube'], { KUBECONFIG: cp.kubeconfigPath });
    await cp.kubectl(['apply', '-f', '-'], { input: manifest(s3) });
    await eventually(async () => {
      const pods = await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=fleet']);
      if (pods.length !== 2 || !pods.every(isReady)) throw new Error(`pods ${JSON.stringify(pods.map((p) => [p.metadata?.name, isReady(p)]))}`);
      const routes = (await (await fetch(`${router.url}/routes`)).json()) as { routes: { prefix: string; replicas: unknown[] }[] };
      expect(routes.routes.find((r) => r.prefix === '/fleet')?.replicas).toHaveLength(2);
    }, 120_000, 500);
  }, 300_000);

  afterAll(async () => {
    await router?.stop();
    await operator?.stop();
    await agent?.stop();
    await Promise.all([cp?.stop(), s3?.stop()]);
  }, 60_000);

  it('answers a sample spread over the ids and every graph through the router, and lists the bucket for none of them', async () => {
    const listedBefore = await bucketListings(s3);
    const sample = fleetSample(40);
    expect([...new Set(sample.map(fleetWidth))].sort((a, b) => a - b)).toEqual([...FLEET_WIDTHS]);
    expect(await wrongAnswers(`${router.url}/fleet`, sample)).toEqual([]);
    expect(await bucketListings(s3)).toBe(listedBefore);
  }, 120_000);

  it('answers metadata of a model never asked for through the router while loading at most that one model', async () => {
    const id = fleetId(FLEET_SIZE - 3);
    const loadsBefore = await successfulLoads(cp);
    // The earlier test loaded its sample: the count read here is the real one.
    expect(loadsBefore).toBeGreaterThanOrEqual(40);
    const listedBefore = await bucketListings(s3);
    const res = await fetch(`${router.url}/fleet/v2/models/${id}`);
    const body = (await res.json()) as { name?: string; inputs?: { name: string }[] };
    expect({ status: res.status, name: body.name, input: body.inputs?.[0]?.name }).toEqual({ status: 200, name: id, input: WINE_INPUT });
    expect((await successfulLoads(cp)) - loadsBefore).toBeLessThanOrEqual(1);
    expect(await bucketListings(s3)).toBe(listedBefore);
  }, 60_000);
});
