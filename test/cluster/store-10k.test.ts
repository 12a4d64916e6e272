import { jest } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import type { ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { getItems } from '../../harness/kube-json.js';
import { WINE_INPUT } from '../../common/wine-model.js';
import { bucketListings, METADATA_LISTINGS, FLEET_SIZE, FLEET_WIDTHS, fleetId, fleetSample, fleetWidth, uploadFleet, wrongAnswers } from '../helpers/model-fleet.js';
import { parsePrometheus } from '../../harness/modelmux-process.js';
import type { RouterProcess } from '../../harness/router-process.js';
import type { S3Server } from '../../harness/s3-server.js';
import { isReady, s3PoolManifest, startS3PoolCluster, type S3PoolCluster } from '../../harness/s3-pool.js';

// Issue 37 in a real control plane: the 10,000-model bucket served by a MultiplexedDeployment
// whose replica pods the operator makes and the node agent runs, behind a router with kube
// discovery. A sample over the ids and every graph answers right, and no request lists the bucket.

jest.setTimeout(300_000);

const PREFIX = 'fleet';

/** Successful loads over the pool's replica pods, read from their own metrics. */
async function successfulLoads(cp: ControlPlane): Promise<number> {
  let n = 0;
  for (const pod of await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=fleet'])) {
    n += parsePrometheus(await (await fetch(`http://${pod.status?.podIP ?? ''}:8080/metrics`)).text()).get('modelmux_replica_model_loads_total{result="success"}') ?? 0;
  }
  return n;
}

describe('a store of 10,000 models of five graphs, served by a MultiplexedDeployment', () => {
  let cluster: S3PoolCluster;
  let cp: ControlPlane;
  let s3: S3Server;
  let router: RouterProcess;

  beforeAll(async () => {
    const started = await startS3PoolCluster({
      s3: { metrics: true },
      router: true,
      fill: async (store) => {
        process.stdout.write(`uploaded ${FLEET_SIZE} models in ${await uploadFleet(store, PREFIX)} ms\n`);
      },
    });
    cluster = started;
    ({ cp, s3, router } = started);
    await cp.kubectl(['apply', '-f', '-'], { input: s3PoolManifest(s3, { name: 'fleet', prefix: PREFIX, replicas: 2, maxModelsPerReplica: 100 }) });
    await eventually(
      async () => {
        const pods = await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=fleet']);
        if (pods.length !== 2 || !pods.every(isReady)) throw new Error(`pods ${JSON.stringify(pods.map((p) => [p.metadata?.name, isReady(p)]))}`);
        const routes = (await (await fetch(`${router.adminUrl}/routes`)).json()) as { routes: { prefix: string; replicas: unknown[] }[] };
        expect(routes.routes.find((r) => r.prefix === '/fleet')?.replicas).toHaveLength(2);
      },
      120_000,
      500,
    );
  }, 300_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it('answers a sample spread over the ids and every graph through the router, and lists the bucket for none of them', async () => {
    const listedBefore = await bucketListings(s3);
    const sample = fleetSample(40);
    expect([...new Set(sample.map(fleetWidth))].sort((a, b) => a - b)).toEqual([...FLEET_WIDTHS]);
    expect(await wrongAnswers(`${router.url}/fleet`, sample)).toEqual([]);
    expect(await bucketListings(s3)).toBe(listedBefore);
  }, 120_000);

  it('answers metadata of a model never asked for through the router while loading at most that one model and listing only its versions', async () => {
    const id = fleetId(FLEET_SIZE - 3);
    const loadsBefore = await successfulLoads(cp);
    // The earlier test loaded its sample: the count read here is the real one.
    expect(loadsBefore).toBeGreaterThanOrEqual(40);
    const listedBefore = await bucketListings(s3);
    const res = await fetch(`${router.url}/fleet/v2/models/${id}`);
    const body = (await res.json()) as { name?: string; inputs?: { name: string }[] };
    expect({ status: res.status, name: body.name, input: body.inputs?.[0]?.name }).toEqual({ status: 200, name: id, input: WINE_INPUT });
    expect((await successfulLoads(cp)) - loadsBefore).toBeLessThanOrEqual(1);
    expect((await bucketListings(s3)) - listedBefore).toBeLessThanOrEqual(METADATA_LISTINGS);
  }, 60_000);
});
