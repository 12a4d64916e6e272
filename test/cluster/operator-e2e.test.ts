import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import { credentials } from '@grpc/grpc-js';
import type { V1Pod } from '@kubernetes/client-node';
import { inferenceClient } from '../../common/grpc/inference-service.js';
import { parseModelTable } from '../../common/model-table.js';
import { DELETION_COST_ANNOTATION, MODELS_ANNOTATION } from '../../common/names.js';
import { WINE_FEATURES, WINE_INPUT } from '../../common/wine-model.js';
import type { MultiplexedDeploymentStatus } from '../../common/resource.js';
import { startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { builtImageDir } from '../../harness/image-container.js';
import { getItems, getJson } from '../../harness/kube-json.js';
import { startNodeAgent, type NodeAgent } from '../../harness/node-agent.js';
import { startOperator, type OperatorProcess } from '../../harness/operator-process.js';
import { spawnManaged } from '../../harness/process-reaper.js';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';
import { expectClose, expected, post, v2Body, v2Outputs, wineRows } from '../integration/replica/wine-fixtures.js';

// The whole chain in a real control plane: the operator makes pods, the node agent runs
// `modelmux replica` for each from the image built from this tree, the replicas load models from a real S3 server with the
// credentials of a Secret the operator wired in, publish their model tables on their pods,
// and scale-down removes the coldest replica.

jest.setTimeout(180_000);
const execFileP = promisify(execFile);

interface Mxd {
  metadata: { generation: number };
  status?: MultiplexedDeploymentStatus;
}

const manifest = (s3: S3Server, replicas: number, maxModels: number): string => `apiVersion: modelmux.io/v1alpha1
kind: MultiplexedDeployment
metadata: { name: wine, namespace: default }
spec:
  replicas: ${replicas}
  routePrefix: /wine
  modelSource: { uri: "s3://${s3.bucket}/wine", endpoint: "${s3.endpoint}", credentialsSecret: s3-creds }
  maxModelsPerReplica: ${maxModels}
  resources: { limits: { nvidia.com/gpu: 1 } }
`;

const livePods = async (cp: ControlPlane): Promise<V1Pod[]> => (await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine'])).filter((p) => p.metadata?.deletionTimestamp === undefined);

const isReady = (p: V1Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

async function readyStatus(cp: ControlPlane, replicas: number): Promise<Mxd> {
  return eventually(
    async () => {
      const m = await getJson<Mxd>(cp, ['mxd', 'wine']);
      const ready = m?.status?.conditions?.find((c) => c.type === 'Ready');
      const progressing = m?.status?.conditions?.find((c) => c.type === 'Progressing');
      if (m?.status?.readyReplicas !== replicas || ready?.status !== 'True' || progressing?.status !== 'False' || m.status.observedGeneration !== m.metadata.generation) {
        throw new Error(`status ${JSON.stringify(m?.status)}`);
      }
      return m;
    },
    120_000,
    500,
  );
}

async function infer(pod: V1Pod, model: string, seed = 0): Promise<void> {
  const rows = wineRows(2, seed);
  const a = await post(`http://${pod.status?.podIP ?? ''}:8080/v2/models/${model}/infer`, v2Body(rows));
  expect(a.status).toBe(200);
  expectClose(v2Outputs(a), expected(model, rows));
}

describe('replicas made by the operator, end to end', () => {
  let cp: ControlPlane;
  let agent: NodeAgent;
  let operator: OperatorProcess;
  let s3: S3Server;

  beforeAll(async () => {
    [cp, s3] = await Promise.all([startControlPlane(), startS3Server({ bucket: 'models' })]);
    await execFileP(process.execPath, [join(process.cwd(), 'dist/cli/main.js'), 'models', '--out', `s3://${s3.bucket}/wine`, '--count', '6', '--s3-endpoint', s3.endpoint], {
      env: { ...process.env, ...s3.awsEnv },
    });
    await cp.kubectl(['apply', '-f', 'crds/']);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
    await cp.kubectl(['create', 'secret', 'generic', 's3-creds', `--from-literal=AWS_ACCESS_KEY_ID=${s3.accessKeyId}`, `--from-literal=AWS_SECRET_ACCESS_KEY=${s3.secretAccessKey}`]);
    agent = await startNodeAgent(cp, { capacity: { gpus: 8 } });
    operator = await startOperator(cp.kubeconfigPath);
  }, 300_000);

  afterAll(async () => {
    await operator?.stop();
    await agent?.stop();
    await Promise.all([cp?.stop(), s3?.stop()]);
  }, 60_000);

  it('becomes Ready with replicas that pass their readiness probes', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: manifest(s3, 2, 2) });
    const m = await readyStatus(cp, 2);
    expect(m.status?.replicas).toBe(2);
    const pods = await livePods(cp);
    expect(pods.filter(isReady)).toHaveLength(2);
  });

  it('runs each replica from the image built from this tree, as the pod spec says, not from the checkout', async () => {
    const [pod] = await livePods(cp);
    // The node agent's container ID is the program's pid: what the kernel says of that process is the proof.
    const pid = /^modelmux-node-agent:\/\/(\d+)$/.exec(pod?.status?.containerStatuses?.[0]?.containerID ?? '')?.[1] ?? '';
    expect(pid).not.toBe('');
    const root = `/proc/${pid}/root`;
    const image = builtImageDir(process.cwd());
    expect(await readFile(join(root, 'app/dist/cli/main.js'), 'utf8')).toBe(await readFile(join(image, 'rootfs/app/dist/cli/main.js'), 'utf8'));
    // The image holds no checkout, no tests and no harness.
    expect(existsSync(join(root, process.cwd()))).toBe(false);
    expect(existsSync(join(root, 'app/dist/harness'))).toBe(false);
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    // runAsUser/runAsGroup of the pod's securityContext (operator/resources/deployment.ts), not the image's USER.
    expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe('65532');
    expect(/^Gid:\s+(\d+)/m.exec(status)?.[1]).toBe('65532');
    expect((await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean)).toEqual(['node', '/app/dist/cli/main.js', 'replica']);
    // Its service account where the in-cluster config reads it (/var/run is the image's link to /run), and a read-only root filesystem.
    expect(await readFile(join(root, 'run/secrets/kubernetes.io/serviceaccount/namespace'), 'utf8')).toBe('default');
    const mounts = await readFile(`/proc/${pid}/mounts`, 'utf8');
    expect(mounts.split('\n').find((l) => l.split(' ')[1] === '/')).toMatch(/^overlay \/ overlay ro,/);
    expect(mounts).toMatch(/ \/var\/cache\/modelmux \S+ rw,/);
  });

  it('serves a model from S3 on a replica, which then lists it in its modelmux.io/models annotation', async () => {
    const [pod] = await livePods(cp);
    await infer(pod!, 'wine-1');
    const table = await eventually(async () => {
      const p = await getJson<V1Pod>(cp, ['pod', pod!.metadata!.name!]);
      const t = parseModelTable(p?.metadata?.annotations?.[MODELS_ANNOTATION]);
      if (!t?.loaded.includes('wine-1' as never)) throw new Error(`table ${JSON.stringify(t)}`);
      return t;
    }, 15_000);
    expect(table.capacity).toBe(2);
  });

  it('answers requests in all three forms through a router with kube discovery', async () => {
    const logFile = join(await mkdtemp(join(tmpdir(), 'modelmux-router-')), 'router.log');
    const router = spawnManaged(process.execPath, ['dist/cli/main.js', 'router', '--discovery', 'kube', '--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', '--admin-port', '0'], {
      cwd: process.cwd(),
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', KUBECONFIG: cp.kubeconfigPath },
      logFile,
    });
    try {
      const url = await eventually(async () => {
        const m = /"router listening".*?"port":(\d+)/.exec(await readFile(logFile, 'utf8'));
        if (!m) throw new Error('router not listening yet');
        return `http://127.0.0.1:${m[1] ?? ''}`;
      }, 30_000);
      const rows = wineRows(3, 5);
      const forms = [
        () => post(`${url}/wine/v2/models/wine-3/infer`, v2Body(rows)),
        () => post(`${url}/wine/`, v2Body(rows), { serve_multiplexed_model_id: 'wine-3' }),
        () => post(`${url}/wine/invocations`, v2Body(rows), { 'X-Amzn-SageMaker-Target-Model': 'wine-3' }),
      ];
      // The router learns the route and its ready pods from the API server: retry until it has.
      await eventually(
        async () => {
          const a = await forms[0]!();
          if (a.status !== 200) throw new Error(`${a.status} ${JSON.stringify(a.body)}`);
        },
        30_000,
        500,
      );
      for (const send of forms) {
        const a = await send();
        expect(a.status).toBe(200);
        expectClose(v2Outputs(a), expected('wine-3', rows));
      }
      // gRPC too: the router found each pod's gRPC port by the container port the operator named `grpc`.
      const grpcPort = /"router listening".*?"grpcPort":(\d+)/.exec(await readFile(logFile, 'utf8'))?.[1];
      const client = new (inferenceClient())(`127.0.0.1:${grpcPort ?? ''}`, credentials.createInsecure());
      try {
        const answer = await new Promise<{ outputs: { contents: { fp32_contents: number[] } }[] }>((resolve, reject) =>
          (client as unknown as Record<string, (req: unknown, cb: (err: Error | null, res: never) => void) => void>)['ModelInfer']?.call(
            client,
            { model_name: 'wine-3', inputs: [{ name: WINE_INPUT, datatype: 'FP32', shape: [rows.length, WINE_FEATURES], contents: { fp32_contents: rows.flat() } }] },
            (err, res) => (err ? reject(err) : resolve(res)),
          ),
        );
        expectClose(answer.outputs[0]?.contents.fp32_contents ?? [], expected('wine-3', rows));
      } finally {
        client.close();
      }
    } finally {
      await router.stop(10_000);
    }
  });

  it('rolls a spec change out to every replica and reports the rollout complete', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: manifest(s3, 2, 3) });
    const m = await readyStatus(cp, 2);
    expect(m.metadata.generation).toBeGreaterThan(1);
    const pods = await livePods(cp);
    expect(pods).toHaveLength(2);
    for (const p of pods) expect(p.spec?.containers[0]?.env?.find((e) => e.name === 'MODELMUX_MAX_MODELS')?.value).toBe('3');
    // The new replicas publish the new capacity once they serve.
    await infer(pods[0]!, 'wine-2');
    await eventually(async () => {
      const p = await getJson<V1Pod>(cp, ['pod', pods[0]!.metadata!.name!]);
      expect(parseModelTable(p?.metadata?.annotations?.[MODELS_ANNOTATION])?.capacity).toBe(3);
    }, 15_000);
  });

  it('scales to five with kubectl scale, and back down by removing the coldest replica', async () => {
    await cp.kubectl(['scale', 'mxd/wine', '--replicas=5']);
    await readyStatus(cp, 5);
    const pods = await livePods(cp);
    expect(pods).toHaveLength(5);
    // The cold replica is the oldest pod: with equal deletion costs the ReplicaSet controller
    // removes the newest first, so only an honoured deletion cost makes it go. The other four
    // get more requests than the cold one has published, so each ends up hotter than it.
    const costOf = (p: V1Pod | undefined): number => Number(p?.metadata?.annotations?.[DELETION_COST_ANNOTATION] ?? '0');
    const created = (p: V1Pod): number => new Date(String(p.metadata?.creationTimestamp ?? '')).getTime();
    const oldestFirst = [...pods].sort((a, b) => created(a) - created(b) || costOf(a) - costOf(b));
    const cold = oldestFirst[0]!;
    const hot = pods.filter((p) => p !== cold);
    expect(created(cold)).toBeLessThan(Math.max(...hot.map(created)));
    const coldCost = costOf(await getJson<V1Pod>(cp, ['pod', cold.metadata!.name!]));
    for (const [i, p] of hot.entries()) {
      for (let k = 0; k < coldCost + 3; k++) await infer(p, `wine-${i}`, k);
    }
    await eventually(async () => {
      for (const p of hot) {
        const cost = costOf(await getJson<V1Pod>(cp, ['pod', p.metadata!.name!]));
        if (!(cost > coldCost)) throw new Error(`${p.metadata!.name!} cost ${cost}, cold replica ${coldCost}`);
      }
    }, 20_000);
    await cp.kubectl(['scale', 'mxd/wine', '--replicas=4']);
    const left = await eventually(async () => {
      const now = await livePods(cp);
      if (now.length !== 4) throw new Error(`${now.length} pods`);
      return now;
    }, 60_000);
    expect(left.map((p) => p.metadata?.name)).not.toContain(cold.metadata?.name);
    expect(left.map((p) => p.metadata?.name).sort()).toEqual(hot.map((p) => p.metadata?.name).sort());
  });

  it('removes every pod when the resource is deleted', async () => {
    await cp.kubectl(['delete', 'mxd', 'wine']);
    await eventually(async () => {
      const pods = await getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine']);
      if (pods.length > 0) throw new Error(`${pods.length} pods left`);
      if (agent.pods().length > 0) throw new Error(`${agent.pods().length} processes left`);
    }, 90_000);
  });
});
