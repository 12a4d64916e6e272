import type { V1Deployment, V1EnvVar, V1ResourceRequirements } from '@kubernetes/client-node';
import { parseByteQuantity } from '../../common/config.js';
import { GRPC_PORT_NAME } from '../../common/names.js';
import { REPLICA_ENV, REPLICA_GRPC_PORT, REPLICA_PORT } from '../../common/replica-env.js';
import { TABLE_PUBLISH_INTERVAL_MS, type MultiplexedDeploymentSpec } from '../../common/resource.js';
import { commonLabels, ownedMeta, ownedNames, selectorLabels, type StoredMultiplexedDeployment } from './meta.js';
import { REPLICA_CONTAINER } from '../start-refusal.js';
import { resourceRequirements } from './resource-requirements.js';
import { replicaShare, runtimeContainer, runtimeReplicaEnv, runtimeVolume, runtimeVolumeMount } from './runtime-container.js';

/** Where the model cache emptyDir is mounted; MODELMUX_CACHE_DIR points here. */
export const CACHE_MOUNT_PATH = '/var/cache/modelmux';
/** A writable /tmp, since the root filesystem is read-only. */
export const TMP_MOUNT_PATH = '/tmp';
/** The non-root user of the modelmux image (distroless "nonroot"). */
export const REPLICA_UID = 65532;

export interface DeploymentOptions {
  /** Used when spec.image is absent. */
  defaultImage: string;
}

/**
 * Resources as the spec gives them, with one fix: Kubernetes refuses an extended resource
 * (nvidia.com/gpu) that is requested without an equal limit, so a request-only GPU is
 * mirrored into limits rather than failing at pod creation where the user cannot see it.
 */
export function containerResources(spec: MultiplexedDeploymentSpec): V1ResourceRequirements {
  return resourceRequirements(spec.runtime === undefined ? spec.resources : replicaShare(spec.resources));
}

/**
 * The replica keeps downloaded files up to this many bytes in the cache volume: 80% of its
 * sizeLimit, leaving room for the downloads in progress, since the kubelet evicts a pod whose
 * emptyDir passes its limit. Undefined for a quantity that is not a plain byte count.
 */
export function diskCacheBytes(modelCacheSize: string): number | undefined {
  const limit = parseByteQuantity(modelCacheSize);
  return limit === undefined ? undefined : Math.floor(limit * 0.8);
}

function value(name: string, v: string): V1EnvVar {
  return { name, value: v };
}

function field(name: string, fieldPath: string): V1EnvVar {
  return { name, valueFrom: { fieldRef: { fieldPath } } };
}

/** The replica's configuration, in the variable names the replica reads (common/replica-env.ts). */
export function replicaEnv(spec: MultiplexedDeploymentSpec): V1EnvVar[] {
  const src = spec.modelSource;
  const env: V1EnvVar[] = [
    value(REPLICA_ENV.port, String(REPLICA_PORT)),
    value(REPLICA_ENV.grpcPort, String(REPLICA_GRPC_PORT)),
    value(REPLICA_ENV.modelSource, src.uri),
    value(REPLICA_ENV.s3Region, src.region),
  ];
  if (src.endpoint !== undefined) env.push(value(REPLICA_ENV.s3Endpoint, src.endpoint));
  const pathStyle = src.forcePathStyle ?? src.endpoint !== undefined;
  env.push(value(REPLICA_ENV.s3ForcePathStyle, String(pathStyle)));
  env.push(
    value(REPLICA_ENV.maxModels, String(spec.maxModelsPerReplica)),
    value(REPLICA_ENV.cachePolicy, spec.cachePolicy),
    value(REPLICA_ENV.maxConcurrentLoads, String(spec.maxConcurrentLoads)),
    value(REPLICA_ENV.maxOngoingRequests, String(spec.maxOngoingRequests)),
    value(REPLICA_ENV.maxBatchSize, String(spec.batching.maxBatchSize)),
    value(REPLICA_ENV.batchWaitMs, String(spec.batching.batchWaitTimeoutMs)),
    value(REPLICA_ENV.cacheDir, CACHE_MOUNT_PATH),
    value(REPLICA_ENV.executionProvider, spec.executionProvider),
    value(REPLICA_ENV.intraOpThreads, String(spec.intraOpThreads)),
    value(REPLICA_ENV.shareGraphs, String(spec.shareGraphs)),
    value(REPLICA_ENV.mapWeights, String(spec.mapWeights)),
  );
  if (spec.maxModelBytesPerReplica !== undefined) env.push(value(REPLICA_ENV.maxModelBytes, spec.maxModelBytesPerReplica));
  if (spec.deviceMemoryBytesPerReplica !== undefined) env.push(value(REPLICA_ENV.deviceMemoryBytes, spec.deviceMemoryBytesPerReplica));
  if (spec.hostTierSize !== undefined) env.push(value(REPLICA_ENV.hostTierBytes, spec.hostTierSize));
  // Only when set: a new variable in the template would roll every existing pool's pods on upgrade.
  if (spec.logLevel !== 'info') env.push(value(REPLICA_ENV.logLevel, spec.logLevel));
  if (spec.tablePublishIntervalMs !== TABLE_PUBLISH_INTERVAL_MS.default) env.push(value(REPLICA_ENV.publishIntervalMs, String(spec.tablePublishIntervalMs)));
  const diskCache = diskCacheBytes(spec.modelCacheSize);
  if (diskCache !== undefined) env.push(value(REPLICA_ENV.diskCacheBytes, String(diskCache)));
  if (spec.runtime !== undefined) env.push(...runtimeReplicaEnv(spec.runtime));
  env.push(field(REPLICA_ENV.podName, 'metadata.name'), field(REPLICA_ENV.podNamespace, 'metadata.namespace'), field(REPLICA_ENV.podIp, 'status.podIP'));
  if (src.credentialsSecret !== undefined) {
    for (const key of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) {
      env.push({ name: key, valueFrom: { secretKeyRef: { name: src.credentialsSecret, key } } });
    }
  }
  return env;
}

/**
 * The Deployment of replica pods. Its replica count is copied from spec.replicas, which
 * `kubectl scale` and the HPA change through the resource's /scale subresource.
 */
export function buildDeployment(mxd: StoredMultiplexedDeployment, options: DeploymentOptions): V1Deployment {
  const spec = mxd.spec;
  const names = ownedNames(mxd);
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: ownedMeta(mxd, names.deployment),
    spec: {
      replicas: spec.replicas,
      selector: { matchLabels: selectorLabels(mxd) },
      revisionHistoryLimit: 3,
      // One extra pod at a time and never fewer ready than wanted: a rollout costs one GPU more, not an outage.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: {
          labels: commonLabels(mxd),
          annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(REPLICA_PORT), 'prometheus.io/path': '/metrics' },
        },
        spec: {
          serviceAccountName: names.serviceAccount,
          // The replica talks to the API server with its own token only to patch its pod.
          automountServiceAccountToken: true,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 30,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: REPLICA_UID,
            runAsGroup: REPLICA_UID,
            fsGroup: REPLICA_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: REPLICA_CONTAINER,
              image: spec.image ?? options.defaultImage,
              args: ['replica'],
              // Why a replica refuses to start (exit 2) reaches the pod's status, and from there the
              // resource's Degraded condition: its termination log, else its log's tail.
              terminationMessagePolicy: 'FallbackToLogsOnError',
              // Kube discovery finds the gRPC service by this port's name (router/discovery/kube-discovery.ts).
              ports: [
                { name: 'http', containerPort: REPLICA_PORT, protocol: 'TCP' },
                { name: GRPC_PORT_NAME, containerPort: REPLICA_GRPC_PORT, protocol: 'TCP' },
              ],
              env: replicaEnv(spec),
              resources: containerResources(spec),
              readinessProbe: { httpGet: { path: '/v2/health/ready', port: 'http' }, periodSeconds: 5, failureThreshold: 3 },
              livenessProbe: { httpGet: { path: '/v2/health/live', port: 'http' }, periodSeconds: 10, failureThreshold: 6 },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                capabilities: { drop: ['ALL'] },
                seccompProfile: { type: 'RuntimeDefault' },
              },
              volumeMounts: [
                { name: 'model-cache', mountPath: CACHE_MOUNT_PATH },
                { name: 'tmp', mountPath: TMP_MOUNT_PATH },
                ...(spec.runtime !== undefined ? [runtimeVolumeMount(spec.runtime)] : []),
              ],
            },
            // Sidecar mode: the runtime second, so the replica stays the pod's first container.
            ...(spec.runtime !== undefined ? [runtimeContainer(spec.resources, spec.runtime)] : []),
          ],
          volumes: [
            { name: 'model-cache', emptyDir: { sizeLimit: spec.modelCacheSize } },
            { name: 'tmp', emptyDir: { sizeLimit: '64Mi' } },
            ...(spec.runtime !== undefined ? [runtimeVolume(spec.runtime)] : []),
          ],
        },
      },
    },
  };
}
