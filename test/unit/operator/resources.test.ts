import type { V1Container } from '@kubernetes/client-node';
import { REPLICA_ENV } from '../../../common/replica-env.js';
import { buildDeployment, containerResources, replicaEnv, CACHE_MOUNT_PATH } from '../../../operator/resources/deployment.js';
import { isExtendedResource } from '../../../operator/resources/resource-requirements.js';
import { buildHpa, toQuantity } from '../../../operator/resources/hpa.js';
import { ownerReference, selectorString, type StoredMultiplexedDeployment } from '../../../operator/resources/meta.js';
import { buildReplicaRole, buildReplicaRoleBinding, buildReplicaServiceAccount } from '../../../operator/resources/replica-rbac.js';
import { buildService } from '../../../operator/resources/service.js';
import { OPERATOR_CLUSTER_RULES } from '../../../operator/rbac-rules.js';
import { parseReplicaConfig } from '../../../replica/config.js';
import { storedResource } from './applied-objects.js';

const mxd = storedResource;

const container = (m: StoredMultiplexedDeployment): V1Container => {
  const c = buildDeployment(m, { defaultImage: 'img:default' }).spec?.template.spec?.containers[0];
  if (!c) throw new Error('no container');
  return c;
};
const envValue = (c: V1Container, name: string): string | undefined => c.env?.find((e) => e.name === name)?.value;

describe('buildDeployment', () => {
  it('runs `replica` with the spec’s replica count, selecting pods by modelmux.io/deployment', () => {
    const d = buildDeployment(mxd(), { defaultImage: 'img:default' });
    expect(d.spec?.replicas).toBe(3);
    expect(d.spec?.selector.matchLabels).toEqual({ 'modelmux.io/deployment': 'wine' });
    expect(d.spec?.template.metadata?.labels?.['modelmux.io/deployment']).toBe('wine');
    expect(container(mxd()).args).toEqual(['replica']);
    expect(d.metadata?.ownerReferences).toEqual([ownerReference(mxd())]);
  });

  it('uses the spec’s image, else the operator’s default', () => {
    expect(container(mxd()).image).toBe('img:default');
    expect(container(mxd({ image: 'registry/modelmux:1.2' })).image).toBe('registry/modelmux:1.2');
  });

  it('requests the GPU and memory of the spec, with integer quantities as strings', () => {
    expect(container(mxd()).resources).toEqual({ limits: { 'nvidia.com/gpu': '1', memory: '8Gi' } });
  });

  it('passes the spec to the replica through its env names, and pod identity through the downward API', () => {
    const c = container(mxd({ maxModelsPerReplica: 5, maxModelBytesPerReplica: '4Gi', batching: { maxBatchSize: 8, batchWaitTimeoutMs: 20 } }));
    expect(envValue(c, REPLICA_ENV.modelSource)).toBe('s3://models/wine');
    expect(envValue(c, REPLICA_ENV.s3Endpoint)).toBe('http://s3.local:9000');
    expect(envValue(c, REPLICA_ENV.s3ForcePathStyle)).toBe('true');
    expect(envValue(c, REPLICA_ENV.maxModels)).toBe('5');
    expect(envValue(c, REPLICA_ENV.maxModelBytes)).toBe('4Gi');
    expect(envValue(c, REPLICA_ENV.maxBatchSize)).toBe('8');
    expect(envValue(c, REPLICA_ENV.batchWaitMs)).toBe('20');
    expect(envValue(c, REPLICA_ENV.port)).toBe('8080');
    expect(envValue(c, REPLICA_ENV.cacheDir)).toBe(CACHE_MOUNT_PATH);
    const fieldOf = (n: string): string | undefined => c.env?.find((e) => e.name === n)?.valueFrom?.fieldRef?.fieldPath;
    expect(fieldOf(REPLICA_ENV.podName)).toBe('metadata.name');
    expect(fieldOf(REPLICA_ENV.podNamespace)).toBe('metadata.namespace');
    expect(fieldOf(REPLICA_ENV.podIp)).toBe('status.podIP');
  });

  it('passes the cache policy, graph sharing, weight mapping and load concurrency, defaults included', () => {
    const defaults = container(mxd());
    expect(envValue(defaults, REPLICA_ENV.cachePolicy)).toBe('frequency');
    expect(envValue(defaults, REPLICA_ENV.shareGraphs)).toBe('true');
    expect(envValue(defaults, REPLICA_ENV.mapWeights)).toBe('true');
    expect(envValue(defaults, REPLICA_ENV.maxConcurrentLoads)).toBe('2');
    const set = container(mxd({ cachePolicy: 'lru', shareGraphs: false, mapWeights: false, maxConcurrentLoads: 4 }));
    expect(envValue(set, REPLICA_ENV.cachePolicy)).toBe('lru');
    expect(envValue(set, REPLICA_ENV.shareGraphs)).toBe('false');
    expect(envValue(set, REPLICA_ENV.mapWeights)).toBe('false');
    expect(envValue(set, REPLICA_ENV.maxConcurrentLoads)).toBe('4');
  });

  it('passes the device budget only when the spec sets one, so an unset pool defaults from its GPU', () => {
    expect(envValue(container(mxd()), REPLICA_ENV.deviceMemoryBytes)).toBeUndefined();
    const c = container(mxd({ executionProvider: 'cuda', deviceMemoryBytesPerReplica: '70Gi' }));
    expect(envValue(c, REPLICA_ENV.deviceMemoryBytes)).toBe('70Gi');
    const env = Object.fromEntries(replicaEnv(mxd({ executionProvider: 'cuda', deviceMemoryBytesPerReplica: '70Gi' }).spec).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
    expect(parseReplicaConfig([], env)).toMatchObject({ executionProvider: 'cuda', deviceMemoryBytes: 70 * 1024 ** 3, warmup: true });
  });

  it('passes the host tier only when the spec sets it, as a quantity the replica reads back in bytes', () => {
    expect(envValue(container(mxd()), REPLICA_ENV.hostTierBytes)).toBeUndefined();
    const spec = mxd({ hostTierSize: '8Gi' }).spec;
    const env = Object.fromEntries(replicaEnv(spec).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
    expect(env[REPLICA_ENV.hostTierBytes]).toBe('8Gi');
    expect(parseReplicaConfig([], env).hostTierBytes).toBe(8 * 1024 ** 3);
    expect(parseReplicaConfig([], { [REPLICA_ENV.modelSource]: 'file:///m' }).hostTierBytes).toBe(0);
  });

  it('writes an env the replica reads back as the spec', () => {
    const spec = mxd({ cachePolicy: 'lru', shareGraphs: false, mapWeights: false, maxConcurrentLoads: 4, maxModelsPerReplica: 5, logLevel: 'warn' }).spec;
    const env = Object.fromEntries(replicaEnv(spec).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
    expect(parseReplicaConfig([], env)).toMatchObject({ cachePolicy: 'lru', shareGraphs: false, mapWeights: false, maxConcurrentLoads: 4, maxModels: 5, logLevel: 'warn' });
  });

  it('sets the replicas’ log level only when the spec changes it, so pools from before the field keep their pods on upgrade', () => {
    expect(mxd().spec.logLevel).toBe('info');
    expect(container(mxd()).env?.map((e) => e.name)).not.toContain(REPLICA_ENV.logLevel);
    expect(envValue(container(mxd({ logLevel: 'error' })), REPLICA_ENV.logLevel)).toBe('error');
  });

  it('sets the table publication interval only when the spec changes it, and the replica reads it back', () => {
    expect(mxd().spec.tablePublishIntervalMs).toBe(1000);
    expect(container(mxd()).env?.map((e) => e.name)).not.toContain(REPLICA_ENV.publishIntervalMs);
    expect(parseReplicaConfig([], { [REPLICA_ENV.modelSource]: 's3://models/wine' }).publishIntervalMs).toBe(1000);
    const env = Object.fromEntries(replicaEnv(mxd({ tablePublishIntervalMs: 5000 }).spec).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
    expect(parseReplicaConfig([], env).publishIntervalMs).toBe(5000);
  });

  it('takes AWS credentials from the named Secret, never as literal values', () => {
    const env = replicaEnv(mxd().spec);
    const key = env.find((e) => e.name === 'AWS_ACCESS_KEY_ID');
    expect(key?.value).toBeUndefined();
    expect(key?.valueFrom?.secretKeyRef).toEqual({ name: 's3-creds', key: 'AWS_ACCESS_KEY_ID' });
    expect(env.find((e) => e.name === 'AWS_SECRET_ACCESS_KEY')?.valueFrom?.secretKeyRef?.name).toBe('s3-creds');
    const noCreds = replicaEnv(mxd({ modelSource: { uri: 'file:///models' } }).spec);
    expect(noCreds.some((e) => e.name.startsWith('AWS_'))).toBe(false);
    expect(noCreds.some((e) => e.name === REPLICA_ENV.s3Endpoint)).toBe(false);
  });

  it('probes readiness and liveness on the replica’s health endpoints', () => {
    const c = container(mxd());
    expect(c.terminationMessagePolicy).toBe('FallbackToLogsOnError');
    expect(c.readinessProbe?.httpGet).toEqual({ path: '/v2/health/ready', port: 'http' });
    expect(c.livenessProbe?.httpGet).toEqual({ path: '/v2/health/live', port: 'http' });
    expect(c.ports).toEqual([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'grpc', containerPort: 8033, protocol: 'TCP' },
    ]);
    expect(c.env).toContainEqual({ name: 'MODELMUX_GRPC_PORT', value: '8033' });
  });

  it('caches models in a size-limited emptyDir mounted where MODELMUX_CACHE_DIR points', () => {
    const pod = buildDeployment(mxd({ modelCacheSize: '20Gi' }), { defaultImage: 'i' }).spec?.template.spec;
    expect(pod?.volumes?.find((v) => v.name === 'model-cache')?.emptyDir).toEqual({ sizeLimit: '20Gi' });
    expect(pod?.containers[0]?.volumeMounts).toContainEqual({ name: 'model-cache', mountPath: CACHE_MOUNT_PATH });
    // Downloaded files may fill 80% of it; the rest is room for downloads in progress.
    expect(envValue(container(mxd({ modelCacheSize: '20Gi' })), REPLICA_ENV.diskCacheBytes)).toBe(String(Math.floor(20 * 1024 ** 3 * 0.8)));
  });

  it('meets the restricted pod security standard', () => {
    const pod = buildDeployment(mxd(), { defaultImage: 'i' }).spec?.template.spec;
    expect(pod?.securityContext?.runAsNonRoot).toBe(true);
    expect(pod?.securityContext?.seccompProfile).toEqual({ type: 'RuntimeDefault' });
    const sc = pod?.containers[0]?.securityContext;
    expect(sc?.allowPrivilegeEscalation).toBe(false);
    expect(sc?.capabilities).toEqual({ drop: ['ALL'] });
    expect(sc?.readOnlyRootFilesystem).toBe(true);
    expect(pod?.serviceAccountName).toBe('wine-replica');
  });

  it('asks Prometheus to scrape the replica’s /metrics', () => {
    expect(buildDeployment(mxd(), { defaultImage: 'i' }).spec?.template.metadata?.annotations).toEqual({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '8080',
      'prometheus.io/path': '/metrics',
    });
  });

  it('is the same object for the same input (so server-side apply is a no-op at rest)', () => {
    expect(JSON.stringify(buildDeployment(mxd(), { defaultImage: 'i' }))).toBe(JSON.stringify(buildDeployment(mxd(), { defaultImage: 'i' })));
  });
});

describe('containerResources', () => {
  it('mirrors a request-only GPU into limits, as Kubernetes demands of extended resources', () => {
    const spec = mxd({ resources: { requests: { 'nvidia.com/gpu': 2, cpu: '500m' } } }).spec;
    expect(containerResources(spec)).toEqual({ requests: { 'nvidia.com/gpu': '2', cpu: '500m' }, limits: { 'nvidia.com/gpu': '2' } });
  });
  it('leaves no empty maps', () => {
    expect(containerResources(mxd({ resources: {} }).spec)).toEqual({});
  });
  it('knows extended resources from native ones', () => {
    expect(isExtendedResource('nvidia.com/gpu')).toBe(true);
    expect(isExtendedResource('cpu')).toBe(false);
    expect(isExtendedResource('hugepages.kubernetes.io/x')).toBe(false);
  });
});

describe('the other owned objects', () => {
  it('a headless Service on the replica’s HTTP and gRPC ports', () => {
    const s = buildService(mxd());
    expect(s.spec?.clusterIP).toBe('None');
    expect(s.spec?.selector).toEqual({ 'modelmux.io/deployment': 'wine' });
    expect(s.spec?.ports).toEqual([
      { name: 'http', port: 8080, targetPort: 'http', protocol: 'TCP' },
      { name: 'grpc', port: 8033, targetPort: 'grpc', protocol: 'TCP' },
    ]);
  });

  it('a Role that lets replicas get and patch pods, nothing more, bound to their ServiceAccount', () => {
    expect(buildReplicaRole(mxd()).rules).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] }]);
    const rb = buildReplicaRoleBinding(mxd());
    expect(rb.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'wine-replica' });
    expect(rb.subjects).toEqual([{ kind: 'ServiceAccount', name: 'wine-replica', namespace: 'ml' }]);
    expect(buildReplicaServiceAccount(mxd()).metadata?.name).toBe('wine-replica');
  });

  it('an HPA on the resource’s /scale with the ongoing-requests Pods metric, only when autoscaling is set', () => {
    expect(buildHpa(mxd())).toBeUndefined();
    const hpa = buildHpa(mxd({ autoscaling: { minReplicas: 2, maxReplicas: 10, targetOngoingRequests: 8 } }));
    expect(hpa?.spec?.scaleTargetRef).toEqual({ apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: 'wine' });
    expect(hpa?.spec?.minReplicas).toBe(2);
    expect(hpa?.spec?.maxReplicas).toBe(10);
    expect(hpa?.spec?.metrics?.[0]?.pods?.metric.name).toBe('modelmux_replica_ongoing_requests');
    expect(hpa?.spec?.metrics?.[0]?.pods?.target).toEqual({ type: 'AverageValue', averageValue: '8' });
  });

  it('with minReplicas 0, also reads the requests the routers hold for the route (an External metric), sized like in-flight ones', () => {
    const hpa = buildHpa(mxd({ autoscaling: { minReplicas: 0, maxReplicas: 4, targetOngoingRequests: 2 } }));
    expect(hpa?.spec?.minReplicas).toBe(0);
    expect(hpa?.spec?.metrics).toEqual([
      { type: 'Pods', pods: { metric: { name: 'modelmux_replica_ongoing_requests' }, target: { type: 'AverageValue', averageValue: '2' } } },
      {
        type: 'External',
        external: { metric: { name: 'modelmux_router_held_requests', selector: { matchLabels: { route: 'wine' } } }, target: { type: 'AverageValue', averageValue: '2' } },
      },
    ]);
    // Not with a floor of one: a router Prometheus does not scrape would then block scale-down.
    expect(buildHpa(mxd({ autoscaling: { minReplicas: 1, maxReplicas: 4, targetOngoingRequests: 2 } }))?.spec?.metrics).toHaveLength(1);
  });

  it('writes fractional targets as milli-quantities', () => {
    expect(toQuantity(8)).toBe('8');
    expect(toQuantity(2.5)).toBe('2500m');
    expect(toQuantity(0.0001)).toBe('1m');
  });

  it('owner references make the resource the controller, so deletion cascades', () => {
    expect(ownerReference(mxd())).toEqual({
      apiVersion: 'modelmux.io/v1alpha1',
      kind: 'MultiplexedDeployment',
      name: 'wine',
      uid: 'uid-1',
      controller: true,
      blockOwnerDeletion: true,
    });
    expect(selectorString(mxd())).toBe('modelmux.io/deployment=wine');
  });
});

describe('the operator’s own RBAC', () => {
  it('never asks for wildcards, secrets or pod creation', () => {
    for (const rule of OPERATOR_CLUSTER_RULES) {
      expect(rule.verbs).not.toContain('*');
      expect(rule.resources).not.toContain('*');
      expect(rule.resources).not.toContain('secrets');
      if (rule.resources?.includes('pods')) expect(rule.verbs).not.toContain('create');
    }
  });
});
