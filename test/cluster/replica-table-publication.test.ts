import { jest } from '@jest/globals';
import { rm } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { parseModelTable } from '../../common/model-table.js';
import { DELETION_COST_ANNOTATION, MODELS_ANNOTATION } from '../../common/names.js';
import { startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../harness/replica-process.js';
import { post, v2Body, wineRows } from '../integration/replica/wine-fixtures.js';
import { wineModelFolder } from '../helpers/wine-folder.js';
import { replicaAccess } from '../helpers/routed-pods.js';

jest.setTimeout(300_000);

const NS = 'default';
const POD = 'replica-under-test';
let cp: ControlPlane;
let dir: string;
let replica: ReplicaProcess | undefined;

beforeAll(async () => {
  cp = await startControlPlane();
  dir = await wineModelFolder('modelmux-publication-', ['a', 'b', 'c']);
  // A pod object to annotate (never scheduled: no node), and a service account that may only get and patch pods.
  await cp.kubectl(['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: POD, namespace: NS }, spec: { containers: [{ name: 'replica', image: 'modelmux:test' }] } }, ...replicaAccess(NS, 'replica')],
    }),
  });
});

afterAll(async () => {
  await replica?.stop();
  await cp?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('replica table publication', () => {
  it('publishes its loaded models and a deletion cost on its own pod, with only get/patch on pods', async () => {
    const kubeconfig = await cp.serviceAccountKubeconfig(NS, 'replica');
    replica = await startReplica({
      args: ['--model-source', pathToFileURL(dir).href, '--max-models', '2', '--publish-interval-ms', '200'],
      env: { KUBECONFIG: kubeconfig, POD_NAME: POD, POD_NAMESPACE: NS },
    });
    const r = replica;
    for (const id of ['a', 'b', 'c']) expect((await post(`${r.url}/v2/models/${id}/infer`, v2Body(wineRows(1)))).status).toBe(200);
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    const annotations = await eventually(async () => {
      const pod = await core.readNamespacedPod({ name: POD, namespace: NS });
      const a = pod.metadata?.annotations ?? {};
      const table = parseModelTable(a[MODELS_ANNOTATION]);
      if (table?.loaded.slice().sort().join(',') !== 'b,c') throw new Error(`table not published yet: ${a[MODELS_ANNOTATION] ?? 'none'}`);
      return a;
    });
    const table = parseModelTable(annotations[MODELS_ANNOTATION]);
    expect(table).toMatchObject({ capacity: 2, loading: [] });
    expect(Number(annotations[DELETION_COST_ANNOTATION])).toBeGreaterThanOrEqual(2);
    const published = (await r.metrics()).get('modelmux_replica_table_publishes_total{result="success"}') ?? 0;
    expect(published).toBeGreaterThan(0);
    // Coalesced: far fewer patches than table changes (each load is two changes, the eviction one more).
    expect(published).toBeLessThan(table?.version ?? 0);
  });
});
