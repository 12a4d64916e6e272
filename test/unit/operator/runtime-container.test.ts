import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { REPLICA_ENV } from '../../../common/replica-env.js';
import { multiplexedDeploymentSpecSchema } from '../../../common/resource.js';
import { buildDeployment, replicaEnv } from '../../../operator/resources/deployment.js';
import { RUNTIME_MODELS_VOLUME } from '../../../operator/resources/runtime-container.js';
import { parseReplicaConfig } from '../../../replica/config.js';
import { storedResource } from './applied-objects.js';

const mlserver = { image: 'seldonio/mlserver:1.7.1', args: ['mlserver', 'start', '/mnt/models'], env: [{ name: 'MLSERVER_HTTP_PORT', value: '8081' }] };

const pod = (runtime: Record<string, unknown> | undefined, resources?: Record<string, unknown>) =>
  buildDeployment(storedResource({ ...(runtime !== undefined ? { runtime: runtime as never } : {}), ...(resources !== undefined ? { resources } : {}) }), { defaultImage: 'img' }).spec?.template.spec;

describe('spec.runtime: a serving runtime beside each replica', () => {
  it('renders one container without it, as before the field', () => {
    const p = pod(undefined);
    expect(p?.containers.map((c) => c.name)).toEqual(['modelmux']);
    expect(p?.volumes?.map((v) => v.name)).not.toContain(RUNTIME_MODELS_VOLUME);
    expect(p?.containers[0]?.env?.map((e) => e.name)).not.toContain(REPLICA_ENV.runtimeUrl);
  });

  it('renders the runtime as a second container sharing a size-limited emptyDir with the replica', () => {
    const p = pod({ ...mlserver, modelsSize: '5Gi' });
    expect(p?.containers.map((c) => c.name)).toEqual(['modelmux', 'runtime']);
    const [replica, runtime] = p?.containers ?? [];
    expect(runtime).toMatchObject({ image: 'seldonio/mlserver:1.7.1', args: ['mlserver', 'start', '/mnt/models'], env: mlserver.env });
    expect(runtime?.command).toBeUndefined();
    expect(runtime?.ports).toEqual([{ name: 'runtime-http', containerPort: 8081, protocol: 'TCP' }]);
    expect(runtime?.readinessProbe?.httpGet).toEqual({ path: '/v2/health/ready', port: 'runtime-http' });
    expect(p?.volumes?.find((v) => v.name === RUNTIME_MODELS_VOLUME)?.emptyDir).toEqual({ sizeLimit: '5Gi' });
    for (const c of [replica, runtime]) expect(c?.volumeMounts).toContainEqual({ name: RUNTIME_MODELS_VOLUME, mountPath: '/mnt/models' });
    expect(runtime?.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
  });

  it('points the replica at the runtime over loopback and at the shared folder, and the replica reads that back', () => {
    const spec = storedResource({ runtime: { ...mlserver, httpPort: 9000, modelsPath: '/models' } }).spec;
    const env = Object.fromEntries(replicaEnv(spec).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
    expect(parseReplicaConfig([], env)).toMatchObject({ runtimeUrl: 'http://127.0.0.1:9000', runtimeModelsDir: '/models' });
  });

  it('gives accelerators to the runtime, which runs the models, and the rest of spec.resources to the replica', () => {
    const p = pod({ ...mlserver, resources: { requests: { cpu: '2', memory: '4Gi' } } }, { requests: { 'nvidia.com/gpu': 1, cpu: '500m' }, limits: { memory: '1Gi' } });
    const [replica, runtime] = p?.containers ?? [];
    expect(replica?.resources).toEqual({ requests: { cpu: '500m' }, limits: { memory: '1Gi' } });
    expect(runtime?.resources).toEqual({ requests: { 'nvidia.com/gpu': '1', cpu: '2', memory: '4Gi' }, limits: { 'nvidia.com/gpu': '1' } });
  });

  it('refuses a runtime on the replica port and a relative models path', () => {
    const base = { routePrefix: '/wine', modelSource: { uri: 's3://models/wine' } };
    expect(multiplexedDeploymentSpecSchema.safeParse({ ...base, runtime: { ...mlserver, httpPort: 8080 } }).success).toBe(false);
    expect(multiplexedDeploymentSpecSchema.safeParse({ ...base, runtime: { ...mlserver, modelsPath: 'models' } }).success).toBe(false);
    expect(multiplexedDeploymentSpecSchema.parse({ ...base, runtime: mlserver }).runtime).toMatchObject({ httpPort: 8081, modelsPath: '/mnt/models', modelsSize: '10Gi' });
  });
});

describe('examples/wine-mlserver-sidecar.yaml', () => {
  it('is a MultiplexedDeployment with a runtime that the resource schema accepts, off the replica port', async () => {
    const doc = parse(await readFile('examples/wine-mlserver-sidecar.yaml', 'utf8')) as { kind?: string; spec?: unknown };
    expect(doc.kind).toBe('MultiplexedDeployment');
    const parsed = multiplexedDeploymentSpecSchema.safeParse(doc.spec);
    expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
    const env = Object.fromEntries((parsed.data?.runtime?.env ?? []).map((e) => [e.name, e.value]));
    expect(env['MLSERVER_HTTP_PORT']).toBe(String(parsed.data?.runtime?.httpPort));
    expect(env['MLSERVER_LOAD_MODELS_AT_STARTUP']).toBe('false');
  });
});
