import { jest } from '@jest/globals';
import type { MultiplexedDeploymentStatus } from '../../common/resource.js';
import { startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { getJson } from '../../harness/kube-json.js';
import { startNodeAgent, type NodeAgent } from '../../harness/node-agent.js';
import { startOperator, type OperatorProcess } from '../../harness/operator-process.js';

// A pool asked for `cuda` on a node that cannot run it (the node agent's replicas have no
// MODELMUX_CUDA_LIBS): each replica exits 2 at start, and the resource says why in a condition
// rather than crash-looping in silence. The reason reaches the pod's status as the kubelet's
// FallbackToLogsOnError would put it there.

jest.setTimeout(180_000);

const manifest = `apiVersion: modelmux.io/v1alpha1
kind: MultiplexedDeployment
metadata: { name: gpu-wine, namespace: default }
spec:
  replicas: 1
  routePrefix: /gpu-wine
  modelSource: { uri: "file:///nonexistent" }
  executionProvider: cuda
  resources: { limits: { nvidia.com/gpu: 1 } }
`;

describe('a pool whose replicas refuse to start', () => {
  let cp: ControlPlane;
  let agent: NodeAgent;
  let operator: OperatorProcess;

  beforeAll(async () => {
    cp = await startControlPlane();
    await cp.kubectl(['apply', '-f', 'crds/']);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
    agent = await startNodeAgent(cp, { capacity: { gpus: 1 } });
    operator = await startOperator(cp.kubeconfigPath);
  }, 300_000);

  afterAll(async () => {
    await operator?.stop();
    await agent?.stop();
    await cp?.stop();
  }, 60_000);

  it('is Degraded/ReplicaRefusesToStart with the replica’s reason for cuda', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: manifest });
    const degraded = await eventually(
      async () => {
        const m = await getJson<{ status?: MultiplexedDeploymentStatus }>(cp, ['mxd', 'gpu-wine']);
        const c = m?.status?.conditions?.find((x) => x.type === 'Degraded');
        if (c?.reason !== 'ReplicaRefusesToStart') throw new Error(`status ${JSON.stringify(m?.status)}`);
        return c;
      },
      120_000,
      500,
    );
    expect(degraded.status).toBe('True');
    expect(degraded.message).toMatch(/^pod gpu-wine-\S+ exits 2 at start: /);
    expect(degraded.message).toContain('execution provider "cuda" cannot run here: library_missing: library missing (libonnxruntime_providers_cuda.so)');
  });
});
