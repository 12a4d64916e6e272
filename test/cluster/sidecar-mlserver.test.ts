import { readdir, readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { jest } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import { freePorts } from '../../cli/local-processes.js';
import { parseModelTable } from '../../common/model-table.js';
import { MODELS_ANNOTATION } from '../../common/names.js';
import type { ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { getItems, getJson } from '../../harness/kube-json.js';
import { closeTo, firstOutput, mlserverBin, trainWineModels, v2Rows, type Expected } from '../helpers/mlserver.js';
import type { NodeAgent } from '../../harness/node-agent.js';
import { s3PoolManifest, startS3PoolCluster, type S3PoolCluster } from '../../harness/s3-pool.js';

// Sidecar mode in a real control plane: the operator renders the replica and an MLServer
// container in one pod, the node agent runs the replica from the modelmux image and MLServer as
// a host process from its venv (no MLServer image is built here: the test declares it runs on
// the host), the shared emptyDir one folder of the pod both see, and the replica loads scikit-learn and XGBoost models
// from S3 into MLServer and publishes its table on its pod.

jest.setTimeout(300_000);

const MLSERVER_IMAGE = 'seldonio/mlserver:1.7.1';

describe('spec.runtime: MLServer beside the replica in a pod', () => {
  let cluster: S3PoolCluster;
  let cp: ControlPlane;
  let agent: NodeAgent;
  let work: string;
  let expected: Record<string, Expected>;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'modelmux-sidecar-cluster-'));
    let bin: string;
    [cluster, bin] = await Promise.all([startS3PoolCluster({ capacity: { gpus: 2 }, router: false, onHost: [MLSERVER_IMAGE] }), mlserverBin()]);
    ({ cp, agent } = cluster);
    const trained = join(work, 'trained');
    expected = await trainWineModels(bin, trained, ['red-sk:sklearn', 'red-xgb:xgboost']);
    for (const e of await readdir(trained, { recursive: true, withFileTypes: true })) {
      if (e.isFile()) await cluster.s3.put(`wine/${relative(trained, join(e.parentPath, e.name))}`, await readFile(join(e.parentPath, e.name)));
    }
    // The node agent runs every pod on the machine's ports: the runtime's must be free ones.
    const [http, grpc, metrics] = await freePorts(3);
    const manifest = `${s3PoolManifest(cluster.s3, { name: 'wine', replicas: 1, maxModelsPerReplica: 1 })}  cachePolicy: lru
  runtime:
    image: ${MLSERVER_IMAGE}
    command: ["${join(bin, 'mlserver')}", start, /mnt/models]
    env:
      - { name: MLSERVER_HTTP_PORT, value: "${http}" }
      - { name: MLSERVER_GRPC_PORT, value: "${grpc}" }
      - { name: MLSERVER_METRICS_PORT, value: "${metrics}" }
      - { name: MLSERVER_LOAD_MODELS_AT_STARTUP, value: "false" }
      - { name: MLSERVER_PARALLEL_WORKERS, value: "0" }
      - { name: MLSERVER_MODEL_REPOSITORY_ROOT, value: /mnt/models }
    httpPort: ${http}
    modelsPath: /mnt/models
    resources: { limits: { nvidia.com/gpu: 1 } }
`;
    await cp.kubectl(['apply', '-f', '-'], { input: manifest });
  }, 900_000);

  afterAll(async () => {
    await cluster?.stop();
    if (work !== undefined) await rm(work, { recursive: true, force: true });
  }, 60_000);

  it('runs both containers ready, serves both models through MLServer with evictions, and publishes the table', async () => {
    const pod = await eventually(
      async () => {
        const [p] = (await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine'])).filter((x) => x.metadata?.deletionTimestamp === undefined);
        const statuses = p?.status?.containerStatuses ?? [];
        if (statuses.length !== 2 || !statuses.every((s) => s.ready)) throw new Error(`pod ${JSON.stringify(p?.status)}`);
        return p as V1Pod;
      },
      180_000,
      500,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await agent.logsOf('default', (await getItems<V1Pod>(cp, ['pods']))[0]?.metadata?.name ?? '')}`);
    });
    expect(pod.spec?.containers.map((c) => c.name)).toEqual(['modelmux', 'runtime']);
    expect(pod.spec?.containers[1]?.resources?.limits).toEqual({ 'nvidia.com/gpu': '1' });

    for (const id of ['red-sk', 'red-xgb', 'red-sk']) {
      const want = expected[id] as Expected;
      const res = await fetch(`http://${pod.status?.podIP ?? ''}:8080/v2/models/${id}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: v2Rows(want.rows) });
      expect(res.status).toBe(200);
      const got = firstOutput((await res.json()) as Record<string, unknown>);
      expect({ id, got, closeToLibrary: closeTo(got, want.predictions) }).toEqual({ id, got, closeToLibrary: true });
    }
    const table = await eventually(async () => {
      const p = await getJson<V1Pod>(cp, ['pod', pod.metadata?.name ?? '']);
      const t = parseModelTable(p?.metadata?.annotations?.[MODELS_ANNOTATION]);
      if (t?.loaded.join() !== 'red-sk') throw new Error(`table ${JSON.stringify(t)}`);
      return t;
    }, 15_000);
    expect(table.capacity).toBe(1);
  });
});
