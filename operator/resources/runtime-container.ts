import type { V1Container, V1EnvVar, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { REPLICA_ENV } from '../../common/replica-env.js';
import type { MultiplexedDeploymentSpec } from '../../common/resource.js';
import { isExtendedResource, resourceRequirements, type ContainerResources } from './resource-requirements.js';

/** Sidecar mode (docs/sidecar.md): the runtime container of a replica pod and what joins it to the replica. */

export type RuntimeSpec = NonNullable<MultiplexedDeploymentSpec['runtime']>;

/** The emptyDir both containers mount: the replica copies model folders in, the runtime reads them. */
export const RUNTIME_MODELS_VOLUME = 'runtime-models';

/** How the replica reaches its runtime: over the pod's loopback, and through the shared folder. */
export function runtimeReplicaEnv(runtime: RuntimeSpec): V1EnvVar[] {
  return [
    { name: REPLICA_ENV.runtimeUrl, value: `http://127.0.0.1:${runtime.httpPort}` },
    { name: REPLICA_ENV.runtimeModelsDir, value: runtime.modelsPath },
  ];
}

export function runtimeVolumeMount(runtime: RuntimeSpec): V1VolumeMount {
  return { name: RUNTIME_MODELS_VOLUME, mountPath: runtime.modelsPath };
}

export function runtimeVolume(runtime: RuntimeSpec): V1Volume {
  return { name: RUNTIME_MODELS_VOLUME, emptyDir: { sizeLimit: runtime.modelsSize } };
}

/** The replica's part of spec.resources when a runtime runs the models: everything but accelerators, which go to the runtime. */
export function replicaShare(resources: ContainerResources): ContainerResources {
  const native = (list: Record<string, string> | undefined): Record<string, string> | undefined =>
    list === undefined ? undefined : Object.fromEntries(Object.entries(list).filter(([name]) => !isExtendedResource(name)));
  return { requests: native(resources.requests), limits: native(resources.limits) };
}

/** The runtime's resources: its own, plus any accelerator spec.resources asked for (the runtime runs the models). */
export function runtimeShare(resources: ContainerResources, runtime: RuntimeSpec): ContainerResources {
  const extended = (list: Record<string, string> | undefined): Record<string, string> => Object.fromEntries(Object.entries(list ?? {}).filter(([name]) => isExtendedResource(name)));
  return {
    requests: { ...extended(resources.requests), ...(runtime.resources.requests ?? {}) },
    limits: { ...extended(resources.limits), ...(runtime.resources.limits ?? {}) },
  };
}

/**
 * The user's runtime, probed on its own V2 health endpoints so the kubelet restarts it when it
 * hangs. It runs under the pod's non-root user like the replica; its root filesystem stays
 * writable, since runtimes write caches and temp files of their own.
 */
export function runtimeContainer(resources: ContainerResources, runtime: RuntimeSpec): V1Container {
  return {
    name: 'runtime',
    image: runtime.image,
    ...(runtime.command !== undefined ? { command: runtime.command } : {}),
    ...(runtime.args !== undefined ? { args: runtime.args } : {}),
    ...(runtime.env !== undefined ? { env: runtime.env } : {}),
    ports: [{ name: 'runtime-http', containerPort: runtime.httpPort, protocol: 'TCP' }],
    resources: resourceRequirements(runtimeShare(resources, runtime)),
    readinessProbe: { httpGet: { path: '/v2/health/ready', port: 'runtime-http' }, periodSeconds: 5, failureThreshold: 3 },
    livenessProbe: { httpGet: { path: '/v2/health/live', port: 'runtime-http' }, periodSeconds: 10, failureThreshold: 6 },
    securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
    volumeMounts: [runtimeVolumeMount(runtime)],
  };
}
