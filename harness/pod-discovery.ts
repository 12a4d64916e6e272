import { rename, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { sdLabelName } from './pod-monitor-scrape.js';

/** One file_sd target group: Prometheus relabels from these labels as from its own discovery's. */
export interface TargetGroup {
  readonly targets: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
}

/**
 * The targets Prometheus' kubernetes_sd_configs (role: pod) would find for a pod: one per
 * declared container port, at podIP:port, with the same `__meta_kubernetes_pod_*` labels
 * (https://prometheus.io/docs/prometheus/latest/configuration/configuration/#pod). Debian's
 * Prometheus is built without Kubernetes discovery, so the harness lists the pods and hands
 * them over through file_sd; selection (the PodMonitor's relabel rules), scraping and queries
 * stay Prometheus' own.
 */
export function podTargets(pod: V1Pod): TargetGroup[] {
  const ip = pod.status?.podIP;
  if (!ip) return [];
  const meta = pod.metadata;
  const common: Record<string, string> = {
    __meta_kubernetes_namespace: meta?.namespace ?? '',
    __meta_kubernetes_pod_name: meta?.name ?? '',
    __meta_kubernetes_pod_uid: meta?.uid ?? '',
    __meta_kubernetes_pod_ip: ip,
    __meta_kubernetes_pod_node_name: pod.spec?.nodeName ?? '',
    __meta_kubernetes_pod_phase: pod.status?.phase ?? '',
    __meta_kubernetes_pod_ready: String(pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false),
  };
  for (const [k, v] of Object.entries(meta?.labels ?? {})) {
    common[`__meta_kubernetes_pod_label_${sdLabelName(k)}`] = v;
    common[`__meta_kubernetes_pod_labelpresent_${sdLabelName(k)}`] = 'true';
  }
  for (const [k, v] of Object.entries(meta?.annotations ?? {})) {
    common[`__meta_kubernetes_pod_annotation_${sdLabelName(k)}`] = v;
    common[`__meta_kubernetes_pod_annotationpresent_${sdLabelName(k)}`] = 'true';
  }
  return (pod.spec?.containers ?? []).flatMap((c) =>
    (c.ports ?? []).map((p) => ({
      targets: [`${ip}:${p.containerPort}`],
      labels: {
        ...common,
        __meta_kubernetes_pod_container_name: c.name,
        __meta_kubernetes_pod_container_port_name: p.name ?? '',
        __meta_kubernetes_pod_container_port_number: String(p.containerPort),
        __meta_kubernetes_pod_container_port_protocol: p.protocol ?? 'TCP',
        __meta_kubernetes_pod_container_init: 'false',
      },
    })),
  );
}

/**
 * Keeps `file` (a file_sd target file) equal to the targets of every pod in the cluster, listed
 * every `periodMs` until `signal` aborts. Written to a temp name and renamed, so Prometheus never
 * reads half a file.
 */
export async function runPodDiscovery(kc: KubeConfig, file: string, signal: AbortSignal, periodMs = 1000): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  let last = '';
  while (!signal.aborted) {
    try {
      const pods = await core.listPodForAllNamespaces();
      const text = JSON.stringify(pods.items.flatMap(podTargets));
      if (text !== last) {
        await writeFile(`${file}.tmp`, text);
        await rename(`${file}.tmp`, file);
        last = text;
      }
    } catch {
      // The API server may be restarting: the next round lists again.
    }
    await sleep(periodMs, undefined, { signal }).catch(() => undefined);
  }
}
