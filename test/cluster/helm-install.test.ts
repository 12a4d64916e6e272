import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { HEADER_RAY_MODEL_ID, HEADER_SAGEMAKER_MODEL, KIND } from '../../common/names.js';
import { SAMPLE_WINE, WINE_FEATURES, WINE_INPUT, wineForward, wineWeights } from '../../common/wine-model.js';
import { startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { helmPath } from '../../harness/kube-tools.js';
import { startNodeAgent, type NodeAgent } from '../../harness/node-agent.js';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';

// The chart as a platform engineer installs it: rendered and dry-run against a real API server,
// then `helm install`ed; the node agent runs its operator and router pods as local processes,
// and the example MultiplexedDeployment serves requests through the router pod.

const run = promisify(execFile);
const RELEASE = 'modelmux';
const SYSTEM_NS = 'modelmux-system';
const APP_NS = 'wine-team';
const ROUTER_PORT = 8000;

let cp: ControlPlane;
let agent: NodeAgent;
let s3: S3Server;
let helm: string;

async function helmRun(args: string[]): Promise<string> {
  const { stdout } = await run(helm, [...args, '--kubeconfig', cp.kubeconfigPath], { maxBuffer: 16 * 1024 * 1024, timeout: 600_000 });
  return stdout;
}

interface PodJson {
  metadata: { name: string; labels?: Record<string, string> };
  status: { podIP?: string; conditions?: { type: string; status: string }[] };
}

async function readyPods(ns: string, selector: string): Promise<PodJson[]> {
  const out = await cp.kubectl(['get', 'pods', '-n', ns, '-l', selector, '-o', 'json']);
  return (JSON.parse(out) as { items: PodJson[] }).items.filter((p) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
}

/** examples/wine-multiplexeddeployment.yaml, pointed at the test's S3 server and namespace. */
async function exampleManifest(): Promise<string> {
  const docs = parseAllDocuments(await readFile('examples/wine-multiplexeddeployment.yaml', 'utf8')).map((d) => d.toJS() as Record<string, unknown>);
  const items = docs.map((doc) => {
    const metadata = { ...(doc['metadata'] as object), namespace: APP_NS };
    if (doc['kind'] === 'Secret') {
      return { ...doc, metadata, stringData: { AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey } };
    }
    const spec = doc['spec'] as { modelSource: Record<string, unknown> };
    return { ...doc, metadata, spec: { ...spec, modelSource: { ...spec.modelSource, uri: `s3://${s3.bucket}/wine`, endpoint: s3.endpoint } } };
  });
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}

describe('the helm chart on a real control plane', () => {
  beforeAll(async () => {
    helm = await helmPath();
    cp = await startControlPlane();
    agent = await startNodeAgent(cp);
    s3 = await startS3Server();
    await run(process.execPath, [join(process.cwd(), 'dist/cli/main.js'), 'models', '--out', `s3://${s3.bucket}/wine`, '--count', '4'], {
      env: { ...process.env, ...s3.awsEnv, MODELMUX_S3_ENDPOINT: s3.endpoint },
    });
    await cp.kubectl(['create', 'namespace', SYSTEM_NS]);
    await cp.kubectl(['create', 'namespace', APP_NS]);
  }, 600_000);

  afterAll(async () => {
    await agent?.stop();
    await s3?.stop();
    await cp?.stop();
  }, 120_000);

  it('renders manifests the API server accepts in a server-side dry run, and so is deploy/', async () => {
    const rendered = await helmRun(['template', RELEASE, 'helm/modelmux', '--namespace', SYSTEM_NS, '--include-crds', '--set', 'prometheusAdapter.configMap.enabled=true']);
    const out = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: rendered });
    expect(out).toContain('customresourcedefinition.apiextensions.k8s.io/multiplexeddeployments.modelmux.io created (server dry run)');
    expect(out).toContain('deployment.apps/modelmux-router created (server dry run)');
    expect(out).toContain('deployment.apps/modelmux-operator created (server dry run)');
    const deploy = await cp.kubectl(['apply', '--dry-run=server', '-f', 'deploy/']);
    expect(deploy).toContain('clusterrole.rbac.authorization.k8s.io/modelmux-operator created (server dry run)');
    // A dry run stores nothing.
    await expect(cp.kubectl(['get', 'crd', 'multiplexeddeployments.modelmux.io'])).rejects.toThrow(/NotFound/);
  }, 120_000);

  it('brings up the operator and router pods with helm install', async () => {
    await helmRun(['install', RELEASE, 'helm/modelmux', '--namespace', SYSTEM_NS, '--set', 'router.replicas=1', '--wait', '--timeout', '5m']);
    const operator = await readyPods(SYSTEM_NS, 'app.kubernetes.io/component=operator');
    const router = await readyPods(SYSTEM_NS, 'app.kubernetes.io/component=router');
    expect([operator.length, router.length]).toEqual([1, 1]);
    const running = agent.pods().map((p) => p.name);
    expect(running).toEqual(expect.arrayContaining([operator[0]?.metadata.name, router[0]?.metadata.name]));
    const status = JSON.parse(await helmRun(['status', RELEASE, '--namespace', SYSTEM_NS, '-o', 'json'])) as { info: { status: string } };
    expect(status.info.status).toBe('deployed');
  }, 600_000);

  it('serves the three request forms of the example MultiplexedDeployment through the router pod', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: await exampleManifest() });
    await cp.kubectl(['wait', `${KIND.toLowerCase()}/wine`, '-n', APP_NS, '--for=condition=Ready', '--timeout=300s'], { timeoutMs: 320_000 });
    const [router] = await readyPods(SYSTEM_NS, 'app.kubernetes.io/component=router');
    const base = `http://${router?.status.podIP ?? ''}:${ROUTER_PORT}/wine`;
    const v2Body = JSON.stringify({ inputs: [{ name: WINE_INPUT, shape: [1, WINE_FEATURES], datatype: 'FP32', data: SAMPLE_WINE }] });
    const rowsBody = JSON.stringify({ instances: [SAMPLE_WINE] });
    const json = { 'content-type': 'application/json' };
    const forms = [
      { id: 'wine-0', url: `${base}/v2/models/wine-0/infer`, headers: json, body: v2Body },
      { id: 'wine-1', url: `${base}/`, headers: { ...json, [HEADER_RAY_MODEL_ID]: 'wine-1' }, body: rowsBody },
      { id: 'wine-2', url: `${base}/invocations`, headers: { ...json, [HEADER_SAGEMAKER_MODEL]: 'wine-2' }, body: rowsBody },
    ];
    for (const form of forms) {
      // The router learns the route and its pods from its watches a moment after Ready.
      const body = await eventually(
        async () => {
          const res = await fetch(form.url, { method: 'POST', headers: form.headers, body: form.body });
          const answer = (await res.json()) as { outputs?: { data?: number[] }[]; predictions?: number[][] };
          if (res.status !== 200) throw new Error(`${form.url}: ${res.status} ${JSON.stringify(answer)}`);
          return answer;
        },
        120_000,
        500,
      );
      const got = body.outputs?.[0]?.data?.[0] ?? body.predictions?.[0]?.[0];
      expect(got).toBeCloseTo(wineForward(wineWeights(form.id), [SAMPLE_WINE])[0] ?? NaN, 4);
    }
  }, 600_000);
});
