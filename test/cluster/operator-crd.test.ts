import { KubectlError, startControlPlane, type ControlPlane } from '../../harness/control-plane.js';

const sample = (name: string, spec: string): string => `apiVersion: modelmux.io/v1alpha1
kind: MultiplexedDeployment
metadata: { name: ${name}, namespace: default }
spec:
${spec}`;

async function refusal(cp: ControlPlane, manifest: string): Promise<string> {
  try {
    await cp.kubectl(['apply', '-f', '-'], { input: manifest });
  } catch (err) {
    if (err instanceof KubectlError) return err.stderr;
    throw err;
  }
  throw new Error('the API server accepted the resource');
}

describe('the MultiplexedDeployment CRD in a real API server', () => {
  let cp: ControlPlane;
  beforeAll(async () => {
    cp = await startControlPlane();
    await cp.kubectl(['apply', '-f', 'crds/']);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
  }, 180_000);
  afterAll(async () => cp?.stop());

  it('is accepted by kubectl apply and served as mxd in the modelmux category', async () => {
    const resources = await cp.kubectl(['api-resources', '--api-group=modelmux.io', '-o', 'wide']);
    expect(resources).toMatch(/multiplexeddeployments\s+mxd\s+modelmux.io\/v1alpha1\s+true\s+MultiplexedDeployment/);
    expect(resources).toContain('modelmux');
  });

  it('stores a valid resource with its defaults filled in, GPU counts written as integers', async () => {
    await cp.kubectl(['apply', '-f', '-'], {
      input: sample('ok', `  routePrefix: /ok\n  modelSource: { uri: "file:///models" }\n  resources: { limits: { nvidia.com/gpu: 1, memory: 1Gi } }`),
    });
    const obj = JSON.parse(await cp.kubectl(['get', 'mxd', 'ok', '-o', 'json'])) as { spec: Record<string, unknown> };
    expect(obj.spec['replicas']).toBe(1);
    expect(obj.spec['maxModelsPerReplica']).toBe(3);
    expect(obj.spec['modelCacheSize']).toBe('10Gi');
    expect(obj.spec['batching']).toEqual({ maxBatchSize: 1, batchWaitTimeoutMs: 0 });
    expect(obj.spec).toMatchObject({ cachePolicy: 'frequency', shareGraphs: true, mapWeights: true, maxConcurrentLoads: 2 });
    expect(obj.spec['resources']).toEqual({ limits: { 'nvidia.com/gpu': 1, memory: '1Gi' } });
    const table = await cp.kubectl(['get', 'modelmux']);
    expect(table).toMatch(/NAME\s+REPLICAS\s+READY\s+MODELS\/REPLICA\s+AGE/);
    expect(table).toMatch(/ok\s+1\s+3\s+\d+s/);
  });

  it('refuses a missing required field, naming it', async () => {
    const err = await refusal(cp, sample('no-source', '  routePrefix: /x'));
    expect(err).toContain('spec.modelSource: Required value');
  });

  it('refuses a bad route prefix, naming the field and its pattern', async () => {
    const err = await refusal(cp, sample('bad-route', '  routePrefix: "/Not/One"\n  modelSource: { uri: "file:///m" }'));
    expect(err).toContain('spec.routePrefix');
    expect(err).toContain('should match');
  });

  it('refuses out-of-bounds numbers and unknown quantities', async () => {
    const err = await refusal(cp, sample('bad-bounds', '  routePrefix: /b\n  modelSource: { uri: "file:///m" }\n  maxModelsPerReplica: 0\n  resources: { limits: { memory: "lots" } }'));
    expect(err).toContain('spec.maxModelsPerReplica');
    expect(err).toContain('should be greater than or equal to 1');
    expect(err).toContain('spec.resources.limits.memory');
  });

  it('refuses a cache policy the replica does not know', async () => {
    const err = await refusal(cp, sample('bad-policy', '  routePrefix: /p\n  modelSource: { uri: "file:///m" }\n  cachePolicy: lfu'));
    expect(err).toContain('spec.cachePolicy');
    expect(err).toContain('Unsupported value: "lfu"');
  });

  it('refuses a model source that is neither s3:// nor file://', async () => {
    const err = await refusal(cp, sample('bad-uri', '  routePrefix: /u\n  modelSource: { uri: "http://example/x" }'));
    expect(err).toContain('spec.modelSource.uri');
  });

  it('refuses autoscaling whose minimum exceeds its maximum (a CEL rule from the zod refinement)', async () => {
    const err = await refusal(cp, sample('bad-hpa', '  routePrefix: /h\n  modelSource: { uri: "file:///m" }\n  autoscaling: { minReplicas: 5, maxReplicas: 2 }'));
    expect(err).toContain('spec.autoscaling');
    expect(err).toContain('minReplicas must not exceed maxReplicas');
  });

  it('scales through the /scale subresource', async () => {
    await cp.kubectl(['scale', 'mxd/ok', '--replicas=4']);
    expect((await cp.kubectl(['get', 'mxd', 'ok', '-o', 'jsonpath={.spec.replicas}'])).trim()).toBe('4');
    const err = await refusal(cp, sample('ok', '  replicas: 1001\n  routePrefix: /ok\n  modelSource: { uri: "file:///models" }'));
    expect(err).toContain('spec.replicas');
  });
});
