import { readdir, readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { jest } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import { freePorts } from '../../cli/local-processes.js';
import { parseModelTable } from '../../common/model-table.js';
import { MODELS_ANNOTATION } from '../../common/names.js';
import { startControlPlane, type ControlPlane } from '../helpers/control-plane.js';
import { eventually } from '../helpers/eventually.js';
import { getItems, getJson } from '../helpers/kube-json.js';
import { closeTo, firstOutput, mlserverBin, trainWineModels, v2Rows, type Expected } from '../helpers/mlserver.js';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent.js';
import { startOperator, type OperatorProcess } from '../helpers/operator-process.js';
import { startS3Server, type S3Server } from '../helpers/s3-server.js';

// Sidecar mode in a real control plane: the operator renders the replica and an MLServer
// container in one pod, the node agent runs both as processes (MLServer from its venv, the
// shared emptyDir a folder of the pod), and the replica loads scikit-learn and XGBoost models
// from S3 into MLServer and publishes its table on its pod.

jest.setTimeout(300_000);

describe('spec.runtime: MLServer beside the replica in a pod', () => {
  let cp: ControlPlane;
  let agent: NodeAgent;
  let operator: OperatorProcess;
  let s3: S3Server;
  let work: string;
  let expected: Record<string, Expected>;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'modelmux-sidecar-cluster-'));
    let bin: string;
    [cp, s3, bin] = await Promise.all([startControlPlane(), startS3Server({ bucket: 'models' }), mlserverBin()]);
    const trained = join(work, 'trained');
    expected = await trainWineModels(bin, trained, ['red-sk:sklearn', 'red-xgb:xgboost']);
    for (const e of await readdir(trained, { recursive: true, withFileTypes: true })) {
      if (e.isFile()) await s3.put(`wine/${relative(trained, join(e.parentPath, e.name))}`, await readFile(join(e.parentPath, e.name)));
    }
    await cp.kubectl(['apply', '-f', 'crds/']);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
    await cp.kubectl(['create', 'secret', 'generic', 's3-creds', `--from-literal=AWS_ACCESS_KEY_ID=${s3.accessKeyId}`, `--from-literal=AWS_SECRET_ACCESS_KEY=${s3.secretAccessKey}`]);
    agent = await startNodeAgent(cp, { capacity: { gpus: 2 } });
    operator = await startOperator(cp.kubeconfigPath);
    // The node agent runs every pod on the machine's ports: the runtime's must be free ones.
    const [http, grpc, metrics] = await freePorts(3);
    const manifest = `apiVersion: modelmux.io/v1alpha1
kind: MultiplexedDeployment
metadata: { name: wine, namespace: default }
spec:
  replicas: 1
  routePrefix: /wine
  modelSource: { uri: "s3://${s3.bucket}/wine", endpoint: "${s3.endpoint}", credentialsSecret: s3-creds }
  maxModelsPerReplica: 1
  cachePolicy: lru
  runtime:
    image: seldonio/mlserver:1.7.1
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
    await operator?.stop();
    await agent?.stop();
    await Promise.all([cp?.stop(), s3?.stop()]);
    if (work !== undefined) await rm(work, { recursive: true, force: true });
  }, 60_000);

  it('runs both containers ready, serves both models through MLServer with evictions, and publishes the table', async () => {
    const pod = await eventually(async () => {
      const [p] = (await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine'])).filter((x) => x.metadata?.deletionTimestamp === undefined);
      const statuses = p?.status?.containerStatuses ?? [];
      if (statuses.length !== 2 || !statuses.every((s) => s.ready)) throw new Error(`pod ${JSON.stringify(p?.status)}`);
      return p as V1Pod;
    }, 180_000, 500).catch(async (err: unknown) => {
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
