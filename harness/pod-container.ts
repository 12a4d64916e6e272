import type { V1Container, V1Pod, V1Volume } from '@kubernetes/client-node';
import type { BuiltImage, ContainerSpec } from './image-container.js';
import { ContainerConfigError } from './pod-env.js';

// How the node agent runs one container of a pod: from the modelmux image built from this tree
// (image-container.ts), as a host process where the test declares that image runs on the host,
// or not at all. Pure: the runner does the I/O.

/** The waiting reason of a container whose image is neither this tree's modelmux image nor declared to run on the host. */
export const IMAGE_NOT_BUILT_HERE = 'ImageNotBuiltHere';

/** Where a pod's service-account token, CA and namespace are in every container, as in a cluster. */
export const SERVICE_ACCOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface PodImages {
  /** This tree's image: every image whose repository's last part is `modelmux` (modelmux:test, ghcr.io/modelmux/modelmux:0.1.0). */
  readonly modelmux: BuiltImage;
  /**
   * Images (as the pod spec names them, tag included) whose containers run as processes of this
   * machine, as the agent ran every container before it ran the image: `command` names a host
   * program, paths under an emptyDir's mountPath in env and args are rewritten to its folder.
   * Only what a test declares, for runtimes that cannot be built here (MLServer).
   */
  readonly onHost: ReadonlySet<string>;
}

export type ImageChoice = { readonly run: 'image' } | { readonly run: 'host' } | { readonly run: 'none'; readonly message: string };

export function isModelmuxImage(image: string): boolean {
  const repository = (image.split('@')[0] ?? '').replace(/:[^/:]*$/, '');
  return repository === 'modelmux' || repository.endsWith('/modelmux');
}

export function chooseImage(image: string | undefined, images: PodImages): ImageChoice {
  if (image !== undefined && isModelmuxImage(image)) return { run: 'image' };
  if (image !== undefined && images.onHost.has(image)) return { run: 'host' };
  return {
    run: 'none',
    message:
      `image "${image ?? ''}" is not the modelmux image (built from this tree in ${images.modelmux.dir}) and the test did not ` +
      'declare it to run on the host (startNodeAgent({ onHost })): the cluster tier cannot run it (docs/testing.md)',
  };
}

/** Pod and container fields the agent cannot honour: a pod naming one waits with its name in CreateContainerConfigError. */
export function unsupportedFields(pod: V1Pod): string[] {
  const spec = pod.spec;
  if (!spec) return [];
  const found: string[] = [];
  for (const field of ['initContainers', 'ephemeralContainers', 'hostPID', 'hostIPC', 'shareProcessNamespace', 'runtimeClassName'] as const) {
    const v = spec[field];
    if (v !== undefined && v !== false && !(Array.isArray(v) && v.length === 0)) found.push(`spec.${field}`);
  }
  for (const v of spec.volumes ?? []) found.push(...unsupportedVolume(v));
  for (const c of spec.containers) found.push(...unsupportedContainer(c, spec.volumes ?? []));
  return found;
}

function unsupportedVolume(v: V1Volume): string[] {
  const found: string[] = [];
  const kind = Object.keys(v).find((k) => k !== 'name' && (v as unknown as Record<string, unknown>)[k] !== undefined) ?? '(no source)';
  if (!['emptyDir', 'hostPath', 'projected'].includes(kind)) found.push(`spec.volumes[${v.name}].${kind}`);
  for (const s of v.projected?.sources ?? []) {
    if (s.clusterTrustBundle || s.podCertificate) found.push(`spec.volumes[${v.name}].projected.sources: only serviceAccountToken, configMap, secret and downwardAPI`);
    for (const item of s.downwardAPI?.items ?? []) if (!item.fieldRef) found.push(`spec.volumes[${v.name}].projected.sources.downwardAPI.items[${item.path}]: only fieldRef`);
  }
  return found;
}

function unsupportedContainer(c: V1Container, volumes: readonly V1Volume[]): string[] {
  const at = `spec.containers[${c.name}]`;
  const found: string[] = [];
  for (const field of ['lifecycle', 'startupProbe', 'volumeDevices', 'stdin', 'tty'] as const) if (c[field] !== undefined && c[field] !== false) found.push(`${at}.${field}`);
  for (const m of c.volumeMounts ?? []) {
    if (m.subPath || m.subPathExpr) found.push(`${at}.volumeMounts[${m.name}].subPath`);
    if (m.mountPropagation && m.mountPropagation !== 'None') found.push(`${at}.volumeMounts[${m.name}].mountPropagation`);
    if (!volumes.some((v) => v.name === m.name)) found.push(`${at}.volumeMounts[${m.name}]: no such volume`);
  }
  if (c.securityContext?.privileged) found.push(`${at}.securityContext.privileged`);
  if ((c.securityContext?.capabilities?.add ?? []).length > 0) found.push(`${at}.securityContext.capabilities.add`);
  return found;
}

/** The folder of this machine each volume of the pod is (emptyDir and projected: written by the runner). */
export type VolumeFolders = ReadonlyMap<string, string>;

export function volumeOf(pod: V1Pod, name: string): V1Volume | undefined {
  return (pod.spec?.volumes ?? []).find((v) => v.name === name);
}

/**
 * How image-container.ts runs `c` from the image: the pod's volumes bind-mounted where the
 * container mounts them (read-only where it says so, and projected volumes always, as a kubelet
 * does), its user from runAsUser/runAsGroup (container, then pod, then the image's USER), its
 * root filesystem read-only where readOnlyRootFilesystem says so (Kubernetes' default: writable).
 */
export function imageContainerSpec(pod: V1Pod, c: V1Container, image: BuiltImage, folders: VolumeFolders, env: Readonly<Record<string, string>>, logFile: string): ContainerSpec {
  const podSc = pod.spec?.securityContext;
  const sc = c.securityContext;
  const [imageUid = '', imageGid = imageUid] = image.config.user.split(':');
  const uid = sc?.runAsUser ?? podSc?.runAsUser ?? (/^\d+$/.test(imageUid) ? Number(imageUid) : undefined);
  const gid = sc?.runAsGroup ?? podSc?.runAsGroup ?? (/^\d+$/.test(imageGid) ? Number(imageGid) : 0);
  if (uid === undefined) throw new ContainerConfigError(`container has runAsNonRoot and image has non-numeric user (${image.config.user}), cannot verify user is non-root`);
  if ((sc?.runAsNonRoot ?? podSc?.runAsNonRoot) === true && uid === 0) throw new ContainerConfigError('container has runAsNonRoot and image will run as root');
  const binds = (c.volumeMounts ?? []).map((m) => {
    const hostPath = folders.get(m.name);
    if (hostPath === undefined) throw new ContainerConfigError(`volume "${m.name}" has no folder on this node`);
    return { hostPath, mountPath: m.mountPath, readOnly: m.readOnly === true || volumeOf(pod, m.name)?.projected !== undefined };
  });
  return {
    ...(c.command ? { command: c.command } : {}),
    ...(c.args ? { args: c.args } : {}),
    env,
    runAs: { uid, gid },
    readOnlyRootFilesystem: sc?.readOnlyRootFilesystem === true,
    binds,
    ...(c.workingDir ? { workingDir: c.workingDir } : {}),
    logFile,
  };
}
