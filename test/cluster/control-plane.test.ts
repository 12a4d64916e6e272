import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MODELS_ANNOTATION } from '../../common/names.js';
import { parseModelTable } from '../../common/model-table.js';
import { SAMPLE_WINE, WINE_INPUT, wineForward, wineWeights } from '../../common/wine-model.js';
import { startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { helmPath } from '../../harness/kube-tools.js';
import { startNodeAgent, type NodeAgent } from '../../harness/node-agent.js';

// The harness's own tests: a real control plane, the node agent as its kubelet, and kubectl.
const NS = 'harness';
const GPUS_ON_NODE = 2;

let cp: ControlPlane;
let agent: NodeAgent;
let modelDir: string;

const manifest = (...objects: object[]): string => JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects });

interface PodJson {
  metadata: { name: string; uid: string; deletionTimestamp?: string; annotations?: Record<string, string> };
  status: {
    phase?: string;
    podIP?: string;
    hostIP?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    containerStatuses?: { ready: boolean; restartCount: number; state?: { waiting?: { reason?: string; message?: string } }; lastState?: { terminated?: { exitCode: number } } }[];
  };
}

async function pods(selector: string): Promise<PodJson[]> {
  const out = await cp.kubectl(['get', 'pods', '-n', NS, '-l', selector, '-o', 'json']);
  return (JSON.parse(out) as { items: PodJson[] }).items;
}

const condition = (pod: PodJson, type: string) => pod.status.conditions?.find((c) => c.type === type);

interface Report {
  env: Record<string, string>;
  ownPodStatus: number;
  listSecretsStatus: number;
  cacheWritable: boolean;
}

async function report(podIP: string): Promise<Report> {
  const res = await fetch(`http://${podIP}:8080/report`);
  return (await res.json()) as Report;
}

const reportServer = (replicas: number, gpus: number): object => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'reporter', namespace: NS },
  spec: {
    replicas,
    selector: { matchLabels: { app: 'reporter' } },
    template: {
      metadata: { labels: { app: 'reporter' } },
      spec: {
        serviceAccountName: 'reporter',
        volumes: [
          { name: 'cache', emptyDir: { sizeLimit: '1Gi' } },
          // The report server is test code, which the image leaves out: mounted as a pod mounts a host folder.
          { name: 'fixtures', hostPath: { path: join(process.cwd(), 'test/fixtures'), type: 'Directory' } },
        ],
        containers: [
          {
            name: 'main',
            image: 'modelmux:test',
            command: ['node', '/fixtures/pod-report-server.mjs'],
            env: [
              { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
              { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
              { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
              { name: 'S3_KEY', valueFrom: { secretKeyRef: { name: 'creds', key: 'key' } } },
              { name: 'GREETING', value: 'hello from $(POD_NAME)' },
              { name: 'CACHE_DIR', value: '/var/cache/modelmux' },
            ],
            envFrom: [{ configMapRef: { name: 'settings' }, prefix: 'CFG_' }],
            ports: [{ name: 'http', containerPort: 8080 }],
            readinessProbe: { httpGet: { path: '/ready', port: 'http' }, periodSeconds: 1 },
            resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { 'nvidia.com/gpu': gpus } },
            volumeMounts: [
              { name: 'cache', mountPath: '/var/cache/modelmux' },
              { name: 'fixtures', mountPath: '/fixtures', readOnly: true },
            ],
          },
        ],
      },
    },
  },
});

beforeAll(async () => {
  const t0 = Date.now();
  modelDir = await mkdtemp(join(tmpdir(), 'modelmux-harness-models-'));
  // A hostPath volume of the replica pod, which runs as the image's user.
  await chmod(modelDir, 0o755);
  const [plane] = await Promise.all([startControlPlane(), promisify(execFile)(process.execPath, ['dist/cli/main.js', 'models', '--out', modelDir, '--count', '2'])]);
  cp = plane;
  process.stdout.write(`control plane ready in ${Date.now() - t0} ms\n`);
  agent = await startNodeAgent(cp, { capacity: { gpus: GPUS_ON_NODE } });
  await cp.kubectl(['create', 'namespace', NS]);
  // What the pods need: their own service account with a Role to read pods (nothing more), a
  // Secret and a ConfigMap their env refers to.
  await cp.kubectl(['apply', '-f', '-'], {
    input: manifest(
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'reporter', namespace: NS } },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'replica', namespace: NS } },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'patch-pods', namespace: NS }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] }] },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'replica-patches-pods', namespace: NS },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'patch-pods' },
        subjects: [{ kind: 'ServiceAccount', name: 'replica', namespace: NS }],
      },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'read-pods', namespace: NS }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }] },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'reporter-reads-pods', namespace: NS },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-pods' },
        subjects: [{ kind: 'ServiceAccount', name: 'reporter', namespace: NS }],
      },
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'creds', namespace: NS }, stringData: { key: 's3cr3t' } },
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: NS }, data: { MODE: 'test' } },
    ),
  });
}, 240_000);

afterAll(async () => {
  await agent?.stop();
  await cp?.stop();
  if (modelDir) await rm(modelDir, { recursive: true, force: true });
}, 60_000);

describe('the test control plane', () => {
  it('answers kubectl as an admin of the built Kubernetes version', async () => {
    const version = JSON.parse(await cp.kubectl(['version', '-o', 'json'])) as { serverVersion: { gitVersion: string } };
    expect(version.serverVersion.gitVersion).toBe('v1.37.2');
    const whoami = JSON.parse(await cp.kubectl(['auth', 'whoami', '-o', 'json'])) as { status: { userInfo: { username: string; groups: string[] } } };
    expect(whoami.status.userInfo.groups).toContain('system:masters');
  });

  it('has a helm, built from the Go module proxy, that reaches the API server', async () => {
    const helm = await helmPath();
    const run = promisify(execFile);
    expect((await run(helm, ['version', '--short'])).stdout).toMatch(/^v3\./);
    const { stdout } = await run(helm, ['list', '--all-namespaces', '-o', 'json', '--kubeconfig', cp.kubeconfigPath]);
    expect(JSON.parse(stdout)).toEqual([]);
  }, 60_000);

  it('registers the node agent as a Ready node with GPU capacity', async () => {
    const node = await eventually(async () => {
      const n = JSON.parse(await cp.kubectl(['get', 'node', agent.nodeName, '-o', 'json'])) as {
        spec: { taints?: unknown[] };
        status: { allocatable: Record<string, string>; conditions: { type: string; status: string }[] };
      };
      // The node lifecycle controller lifts the not-ready taint once it sees the node Ready.
      if ((n.spec.taints ?? []).length > 0) throw new Error(`node still tainted: ${JSON.stringify(n.spec.taints)}`);
      return n;
    }, 60_000);
    expect(node.status.allocatable['nvidia.com/gpu']).toBe(String(GPUS_ON_NODE));
    expect(node.status.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
  }, 90_000);

  it('applies a CustomResourceDefinition and serves the new kind', async () => {
    await cp.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'widgets.harness.modelmux.io' },
        spec: {
          group: 'harness.modelmux.io',
          names: { kind: 'Widget', plural: 'widgets', singular: 'widget' },
          scope: 'Namespaced',
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', required: ['size'], properties: { size: { type: 'integer', minimum: 1 } } } } } },
            },
          ],
        },
      }),
    });
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/widgets.harness.modelmux.io', '--timeout=30s']);
    await cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'harness.modelmux.io/v1', kind: 'Widget', metadata: { name: 'w', namespace: NS }, spec: { size: 3 } }) });
    expect(await cp.kubectl(['get', 'widget', 'w', '-n', NS, '-o', 'jsonpath={.spec.size}'])).toBe('3');
    // An object owned by the custom resource goes with it, even seconds after the CRD appeared.
    const uid = await cp.kubectl(['get', 'widget', 'w', '-n', NS, '-o', 'jsonpath={.metadata.uid}']);
    await cp.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'owned-by-w', namespace: NS, ownerReferences: [{ apiVersion: 'harness.modelmux.io/v1', kind: 'Widget', name: 'w', uid }] },
      }),
    });
    await cp.kubectl(['delete', 'widget', 'w', '-n', NS]);
    await eventually(async () => {
      const left = await cp.kubectl(['get', 'configmap', '-n', NS, '-o', 'name']);
      if (left.includes('owned-by-w')) throw new Error('the owned ConfigMap is still there');
    }, 20_000);
    // The API server validates against the schema: the refusal names the field.
    await expect(
      cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'harness.modelmux.io/v1', kind: 'Widget', metadata: { name: 'bad', namespace: NS }, spec: { size: 0 } }) }),
    ).rejects.toThrow(/spec\.size/);
  }, 60_000);

  it("runs a Deployment's pods as local processes that become Ready on their own addresses, with the pod's env and RBAC", async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: JSON.stringify(reportServer(2, 1)) });
    await cp.kubectl(['rollout', 'status', `deployment/reporter`, '-n', NS, '--timeout=90s']);
    const running = await pods('app=reporter');
    expect(running).toHaveLength(2);
    const ips = running.map((p) => p.status.podIP ?? '');
    expect(new Set(ips).size).toBe(2);
    for (const pod of running) {
      expect(pod.status.phase).toBe('Running');
      expect(pod.status.podIP).toMatch(/^127\.0\.0\.\d+$/);
      expect(pod.status.hostIP).toBe('127.0.0.1');
      expect(condition(pod, 'Ready')?.status).toBe('True');
      const r = await report(pod.status.podIP ?? '');
      expect(r.env['POD_NAME']).toBe(pod.metadata.name);
      expect(r.env['POD_NAMESPACE']).toBe(NS);
      expect(r.env['POD_IP']).toBe(pod.status.podIP);
      expect(r.env['MODELMUX_HOST']).toBe(pod.status.podIP);
      expect(r.env['S3_KEY']).toBe('s3cr3t');
      expect(r.env['CFG_MODE']).toBe('test');
      expect(r.env['GREETING']).toBe(`hello from ${pod.metadata.name}`);
      // The emptyDir is mounted where the pod says, writable by the image's user.
      expect(r.env['CACHE_DIR']).toBe('/var/cache/modelmux');
      expect(r.cacheWritable).toBe(true);
      // The pod's token is its service account's: the Role lets it read its pod, nothing lets it list Secrets.
      expect(r.ownPodStatus).toBe(200);
      expect(r.listSecretsStatus).toBe(403);
    }
  }, 120_000);

  it('runs `modelmux replica` in a pod: it serves inference on its pod IP and publishes its model table on its pod', async () => {
    await cp.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'replica', namespace: NS },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'replica' } },
          template: {
            metadata: { labels: { app: 'replica' } },
            spec: {
              serviceAccountName: 'replica',
              containers: [
                {
                  name: 'replica',
                  image: 'modelmux:test',
                  args: ['replica'],
                  env: [
                    { name: 'MODELMUX_MODEL_SOURCE', value: 'file:///models' },
                    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                    { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
                  ],
                  ports: [{ name: 'http', containerPort: 8080 }],
                  readinessProbe: { httpGet: { path: '/v2/health/ready', port: 'http' }, periodSeconds: 1 },
                  volumeMounts: [{ name: 'models', mountPath: '/models', readOnly: true }],
                },
              ],
              volumes: [{ name: 'models', hostPath: { path: modelDir, type: 'Directory' } }],
            },
          },
        },
      }),
    });
    await cp.kubectl(['rollout', 'status', 'deployment/replica', '-n', NS, '--timeout=90s']);
    const [pod] = await pods('app=replica');
    if (!pod) throw new Error('no replica pod');
    const res = await fetch(`http://${pod.status.podIP ?? ''}:8080/v2/models/wine-0/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: WINE_INPUT, shape: [1, SAMPLE_WINE.length], datatype: 'FP32', data: [...SAMPLE_WINE] }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { outputs: { data: number[] }[] };
    expect(body.outputs[0]?.data[0]).toBeCloseTo(wineForward(wineWeights('wine-0'), [SAMPLE_WINE])[0] ?? NaN, 4);
    // Published through the pod's own service-account kubeconfig, which the Role lets patch pods.
    const table = await eventually(async () => {
      const [p] = await pods('app=replica');
      const t = parseModelTable(p?.metadata.annotations?.[MODELS_ANNOTATION]);
      if (!t?.loaded.map(String).includes('wine-0')) throw new Error('model table not published yet');
      return t;
    }, 30_000);
    expect(table.loaded).toEqual(['wine-0']);
  }, 120_000);

  it('leaves a pod asking for more GPUs than the node has Pending, and the scheduler says why', async () => {
    await cp.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'greedy', namespace: NS, labels: { app: 'greedy' } },
        spec: { containers: [{ name: 'main', image: 'modelmux:test', args: ['--help'], resources: { limits: { 'nvidia.com/gpu': GPUS_ON_NODE + 1 } } }] },
      }),
    });
    const pod = await eventually(async () => {
      const [p] = await pods('app=greedy');
      if (!p || condition(p, 'PodScheduled')?.reason !== 'Unschedulable') throw new Error('not yet marked unschedulable');
      return p;
    }, 60_000);
    expect(pod.status.phase).toBe('Pending');
    expect(condition(pod, 'PodScheduled')?.message).toMatch(/Insufficient nvidia\.com\/gpu/);
    expect(agent.pods().some((p) => p.name === 'greedy')).toBe(false);
    await cp.kubectl(['delete', 'pod', 'greedy', '-n', NS, '--wait=true']);
  }, 90_000);

  it('refuses, named, an image it cannot run and a pod spec field it cannot honour, rather than run them otherwise', async () => {
    const pod = (name: string, spec: object): object => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: NS, labels: { app: name } }, spec });
    await cp.kubectl(['apply', '-f', '-'], {
      input: manifest(
        pod('foreign', { containers: [{ name: 'main', image: 'busybox:1.36', command: ['sleep', '600'] }] }),
        pod('configured', {
          volumes: [{ name: 'settings', configMap: { name: 'settings' } }],
          containers: [{ name: 'main', image: 'modelmux:test', args: ['--help'], volumeMounts: [{ name: 'settings', mountPath: '/etc/settings' }] }],
        }),
      ),
    });
    const waiting = async (name: string): Promise<{ reason?: string; message?: string }> =>
      eventually(async () => {
        const [p] = await pods(`app=${name}`);
        const w = p?.status.containerStatuses?.[0]?.state?.waiting;
        if (!w || w.reason === 'ContainerCreating') throw new Error(`${name}: ${JSON.stringify(p?.status)}`);
        expect(p?.status.phase).toBe('Pending');
        return w;
      }, 30_000);
    expect(await waiting('foreign')).toEqual({ reason: 'ImageNotBuiltHere', message: expect.stringMatching(/^image "busybox:1\.36" is not the modelmux image/) as unknown });
    expect(await waiting('configured')).toEqual({ reason: 'CreateContainerConfigError', message: expect.stringContaining('cannot honour spec.volumes[settings].configMap') as unknown });
    await cp.kubectl(['delete', 'pod', 'foreign', 'configured', '-n', NS, '--wait=true', '--timeout=30s']);
  }, 90_000);

  it('reports a crashing container with its exit code and restart count', async () => {
    await cp.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'crasher', namespace: NS, labels: { app: 'crasher' } },
        spec: { containers: [{ name: 'main', image: 'modelmux:test', command: ['node', '-e', 'console.error("crashing on purpose"); process.exit(3)'] }] },
      }),
    });
    const pod = await eventually(async () => {
      const [p] = await pods('app=crasher');
      const s = p?.status.containerStatuses?.[0];
      // Caught between two runs, backing off: a restart has happened and the next waits.
      if (!p || !s || s.restartCount < 1 || s.state?.waiting?.reason !== 'CrashLoopBackOff') throw new Error('no back-off reported yet');
      return { p, s };
    }, 60_000);
    expect(pod.s.lastState?.terminated?.exitCode).toBe(3);
    expect(pod.s.ready).toBe(false);
    expect(condition(pod.p, 'Ready')?.status).toBe('False');
    expect(await agent.logsOf(NS, 'crasher')).toContain('crashing on purpose');
    await cp.kubectl(['delete', 'pod', 'crasher', '-n', NS, '--wait=true', '--timeout=30s']);
  }, 90_000);

  it('stops the process of a deleted pod and completes the deletion', async () => {
    const [victim] = await pods('app=reporter');
    if (!victim) throw new Error('no reporter pod');
    const ip = victim.status.podIP ?? '';
    await cp.kubectl(['delete', 'pod', victim.metadata.name, '-n', NS, '--wait=true', '--timeout=30s']);
    await expect(fetch(`http://${ip}:8080/ready`)).rejects.toThrow();
    // kubectl sees the object gone as soon as the API server deletes it, which can be before the
    // agent has read the answer to its own delete call and dropped the pod's runner.
    await eventually(() => expect(agent.pods().some((p) => p.uid === victim.metadata.uid)).toBe(false), 10_000);
    // The ReplicaSet replaces it, and the replacement runs.
    await cp.kubectl(['rollout', 'status', 'deployment/reporter', '-n', NS, '--timeout=60s']);
    const now = await pods('app=reporter');
    expect(now.map((p) => p.metadata.name)).not.toContain(victim.metadata.name);
    expect(now.filter((p) => condition(p, 'Ready')?.status === 'True')).toHaveLength(2);
  }, 90_000);

  it('keeps working across an API server restart', async () => {
    await cp.restartApiServer();
    expect(await cp.kubectl(['get', 'namespace', NS, '-o', 'jsonpath={.metadata.name}'])).toBe(NS);
    // Every watcher (controllers, scheduler, node agent) must have come back for this to converge.
    // Two GPUs on the node and one per pod: the third replica stays Pending.
    await cp.kubectl(['scale', 'deployment/reporter', '-n', NS, '--replicas=3']);
    const after = await eventually(async () => {
      const list = await pods('app=reporter');
      const ready = list.filter((p) => condition(p, 'Ready')?.status === 'True');
      const unschedulable = list.filter((p) => condition(p, 'PodScheduled')?.reason === 'Unschedulable');
      if (list.length !== 3 || ready.length !== 2 || unschedulable.length !== 1) throw new Error(`ready ${ready.length}, unschedulable ${unschedulable.length} of ${list.length}`);
      return ready;
    }, 60_000);
    for (const pod of after) expect((await report(pod.status.podIP ?? '')).env['POD_NAME']).toBe(pod.metadata.name);
    // Back to one replica: the ReplicaSet removes the pending pod first, then a running one.
    await cp.kubectl(['scale', 'deployment/reporter', '-n', NS, '--replicas=1']);
    await eventually(async () => {
      const list = await pods('app=reporter');
      if (list.length !== 1 || condition(list[0] as PodJson, 'Ready')?.status !== 'True') throw new Error(`${list.length} pods`);
    }, 60_000);
  }, 180_000);
});
