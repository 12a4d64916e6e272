import type { V1Container, V1Pod } from '@kubernetes/client-node';

/** What env resolution needs from the API server, injected so the logic stays pure. */
export interface EnvSources {
  /** The decoded data of a Secret, or undefined when it does not exist. */
  secret(name: string): Promise<Record<string, string> | undefined>;
  configMap(name: string): Promise<Record<string, string> | undefined>;
}

/** The pod's addresses as the kubelet knows them when it starts the containers. */
export interface PodAddresses {
  readonly podIP: string;
  readonly hostIP: string;
}

/** A container the kubelet would refuse to start: its status says CreateContainerConfigError. */
export class ContainerConfigError extends Error {
  override readonly name = 'ContainerConfigError';
}

/** The fieldRef paths the downward API resolves (besides a label or an annotation). */
const FIELDS = new Map<string, (pod: V1Pod, addr: PodAddresses) => string>([
  ['metadata.name', (pod) => pod.metadata?.name ?? ''],
  ['metadata.namespace', (pod) => pod.metadata?.namespace ?? ''],
  ['metadata.uid', (pod) => pod.metadata?.uid ?? ''],
  ['spec.nodeName', (pod) => pod.spec?.nodeName ?? ''],
  ['spec.serviceAccountName', (pod) => pod.spec?.serviceAccountName ?? 'default'],
  ['status.podIP', (_, addr) => addr.podIP],
  ['status.podIPs', (_, addr) => addr.podIP],
  ['status.hostIP', (_, addr) => addr.hostIP],
  ['status.hostIPs', (_, addr) => addr.hostIP],
]);

/** A downward-API fieldRef (env or a downwardAPI volume item) of the pod. */
export function fieldValue(pod: V1Pod, path: string, addr: PodAddresses): string {
  const bracket = /^metadata\.(labels|annotations)\['([^']+)'\]$/.exec(path);
  if (bracket) {
    const map = bracket[1] === 'labels' ? pod.metadata?.labels : pod.metadata?.annotations;
    return map?.[bracket[2] ?? ''] ?? '';
  }
  const read = FIELDS.get(path);
  if (read === undefined) throw new ContainerConfigError(`unsupported fieldRef ${path}`);
  return read(pod, addr);
}

/** $(VAR) references to earlier variables are expanded, $$( escapes, unknown ones stay: Kubernetes' rules. */
export function expandReferences(value: string, vars: ReadonlyMap<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name: string | undefined) => {
    if (name === undefined) return '$';
    return vars.get(name) ?? match;
  });
}

/**
 * The environment of one container, as the kubelet builds it: envFrom first, then env in
 * order (later entries win, and may refer to earlier ones). A missing non-optional Secret,
 * ConfigMap or key is a ContainerConfigError, as in a real cluster.
 */
export async function resolveContainerEnv(pod: V1Pod, container: V1Container, addr: PodAddresses, sources: EnvSources): Promise<Map<string, string>> {
  const vars = new Map<string, string>();
  const source = async (kind: 'Secret' | 'ConfigMap', name: string): Promise<Record<string, string> | undefined> => (kind === 'Secret' ? sources.secret(name) : sources.configMap(name));
  const keyOf = async (kind: 'Secret' | 'ConfigMap', name: string, key: string, optional: boolean | undefined): Promise<string | undefined> => {
    const data = await source(kind, name);
    if (!data) {
      if (optional) return undefined;
      throw new ContainerConfigError(`${kind.toLowerCase()} "${name}" not found`);
    }
    const value = data[key];
    if (value === undefined && !optional) throw new ContainerConfigError(`couldn't find key ${key} in ${kind} ${pod.metadata?.namespace ?? ''}/${name}`);
    return value;
  };

  for (const from of container.envFrom ?? []) {
    const ref = from.secretRef ? { kind: 'Secret' as const, ...from.secretRef } : from.configMapRef ? { kind: 'ConfigMap' as const, ...from.configMapRef } : undefined;
    if (!ref) continue;
    const data = await source(ref.kind, ref.name ?? '');
    if (!data) {
      if (ref.optional) continue;
      throw new ContainerConfigError(`${ref.kind.toLowerCase()} "${ref.name ?? ''}" not found`);
    }
    for (const [k, v] of Object.entries(data)) vars.set((from.prefix ?? '') + k, v);
  }

  for (const e of container.env ?? []) {
    const vf = e.valueFrom;
    let value: string | undefined;
    if (!vf) value = expandReferences(e.value ?? '', vars);
    else if (vf.fieldRef) value = fieldValue(pod, vf.fieldRef.fieldPath, addr);
    else if (vf.secretKeyRef) value = await keyOf('Secret', vf.secretKeyRef.name ?? '', vf.secretKeyRef.key, vf.secretKeyRef.optional);
    else if (vf.configMapKeyRef) value = await keyOf('ConfigMap', vf.configMapKeyRef.name ?? '', vf.configMapKeyRef.key, vf.configMapKeyRef.optional);
    else throw new ContainerConfigError(`unsupported valueFrom in env ${e.name}`);
    if (value !== undefined) vars.set(e.name, value);
  }
  return vars;
}
