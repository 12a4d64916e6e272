/**
 * The Prometheus scrape configuration the Prometheus Operator generates from a PodMonitor, for
 * the part of the PodMonitor API the chart's templates/podmonitor.yaml uses. The test cluster
 * has no Prometheus Operator: its Prometheus gets this translation of the chart's own rendered
 * PodMonitor, so the chart's selector, port and path are what decide which pods are scraped
 * (a selector that stopped matching the replica pods would leave the autoscaler blind).
 * Discovery is the caller's: anything yielding the `__meta_kubernetes_pod_*` labels of role pod.
 */

export interface PodMonitor {
  readonly metadata: { readonly name: string; readonly namespace: string };
  readonly spec: {
    readonly namespaceSelector?: { readonly any?: boolean; readonly matchNames?: readonly string[] };
    readonly selector: { readonly matchLabels?: Readonly<Record<string, string>> };
    readonly podMetricsEndpoints: readonly { readonly port?: string; readonly path?: string; readonly interval?: string }[];
  };
}

interface RelabelConfig {
  readonly source_labels?: readonly string[];
  readonly regex?: string;
  readonly action?: 'keep' | 'drop' | 'replace';
  readonly target_label?: string;
  readonly replacement?: string;
}

export interface ScrapeConfig {
  readonly job_name: string;
  readonly scrape_interval?: string;
  readonly metrics_path: string;
  readonly file_sd_configs: readonly { files: readonly string[]; refresh_interval: string }[];
  readonly relabel_configs: readonly RelabelConfig[];
}

/** Kubernetes label name as Prometheus' service discovery spells it: `app.kubernetes.io/name` → `app_kubernetes_io_name`. */
export const sdLabelName = (label: string): string => label.replace(/[^a-zA-Z0-9_]/g, '_');

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * One scrape job per endpoint, reading `targetFile` (file_sd, see pod-discovery.ts), named and
 * relabelled as the Prometheus Operator does: keep pods whose labels match (present and equal),
 * keep the named container port, drop finished pods, and label every series with `namespace`,
 * `pod`, `container`, `endpoint` and `job` = `<namespace>/<name>` — the labels queries (and
 * KEDA triggers) select on.
 */
export function podMonitorScrapeConfigs(pm: PodMonitor, targetFile: string): ScrapeConfig[] {
  const { name, namespace } = pm.metadata;
  const ns = pm.spec.namespaceSelector;
  const namespaces: RelabelConfig[] =
    ns?.any === true ? [] : [{ action: 'keep', source_labels: ['__meta_kubernetes_namespace'], regex: `(${(ns?.matchNames ?? [namespace]).map(escapeRegex).join('|')})` }];
  const selector: RelabelConfig[] = Object.entries(pm.spec.selector.matchLabels ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([label, value]) => ({
      action: 'keep',
      source_labels: [`__meta_kubernetes_pod_label_${sdLabelName(label)}`, `__meta_kubernetes_pod_labelpresent_${sdLabelName(label)}`],
      regex: `(${escapeRegex(value)});true`,
    }));
  return pm.spec.podMetricsEndpoints.map((ep, i) => ({
    job_name: `podMonitor/${namespace}/${name}/${i}`,
    ...(ep.interval !== undefined ? { scrape_interval: ep.interval } : {}),
    metrics_path: ep.path ?? '/metrics',
    file_sd_configs: [{ files: [targetFile], refresh_interval: '1s' }],
    relabel_configs: [
      ...namespaces,
      { action: 'drop', source_labels: ['__meta_kubernetes_pod_phase'], regex: '(Failed|Succeeded)' },
      ...selector,
      ...(ep.port !== undefined ? [{ action: 'keep' as const, source_labels: ['__meta_kubernetes_pod_container_port_name'], regex: escapeRegex(ep.port) }] : []),
      { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
      { source_labels: ['__meta_kubernetes_pod_container_name'], target_label: 'container' },
      { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
      { target_label: 'job', replacement: `${namespace}/${name}` },
      ...(ep.port !== undefined ? [{ target_label: 'endpoint', replacement: ep.port }] : []),
    ],
  }));
}
