import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { aggregatedServerArgs, issueAggregatedServingCertificate, registerAggregatedServer, unregisterAggregatedServer } from './api-service.js';
import { createCertificateAuthority } from './certs.js';
import { freePort, type ControlPlane } from './control-plane.js';
import { helmPath, prometheusAdapterAssets } from './kube-tools.js';
import { removeDirOnDeath, spawnManaged } from './process-reaper.js';

const run = promisify(execFile);

/** Where the prometheus-adapter chart would put it; its Service and APIServices live here. */
const NAMESPACE = 'monitoring';
const SERVICE = 'prometheus-adapter';
const GROUPS = ['custom.metrics.k8s.io', 'external.metrics.k8s.io'];

export interface PrometheusAdapter {
  /** The config.yaml it runs with (the chart's), and its log, for failure messages. */
  logs(): Promise<string>;
  /** Stops it and removes its APIServices (the control plane stays usable). */
  stop(): Promise<void>;
}

/**
 * prometheus-adapter's config.yaml as the chart renders it (the ConfigMap of
 * `prometheusAdapter.configMap.enabled=true`): the rules the HPA test runs with are the chart's.
 */
export async function chartAdapterConfig(): Promise<string> {
  const { stdout } = await run(await helmPath(), [
    'template',
    'modelmux',
    'helm/modelmux',
    '--namespace',
    NAMESPACE,
    '--set',
    'prometheusAdapter.configMap.enabled=true',
    '--show-only',
    'templates/prometheus-adapter-rules.yaml',
  ]);
  const config = (parse(stdout) as { data?: Record<string, string> }).data?.['config.yaml'];
  if (config === undefined) throw new Error(`the chart rendered no config.yaml:\n${stdout}`);
  return config;
}

/**
 * Runs prometheus-adapter (built from the Go module proxy, build-prometheus-adapter.sh) against
 * the test control plane as its chart runs it, minus the pod: the chart's rules, Prometheus at
 * `prometheusUrl`, serving TLS with a certificate of its own CA, authentication and
 * authorization delegated to the API server, registered as `custom.metrics.k8s.io` and
 * `external.metrics.k8s.io` through the aggregation layer (api-service.ts). The HPA controller
 * then reads its metrics as in a cluster: kube-apiserver → front proxy → adapter → Prometheus.
 * It lists Prometheus' series every 2 s (10 min by default), so a metric that appears with the
 * first replica pod is served within seconds. Resolves once both APIServices are Available.
 */
export async function startPrometheusAdapter(cp: ControlPlane, prometheusUrl: string, opts: { keepDataDir?: boolean } = {}): Promise<PrometheusAdapter> {
  const keep = opts.keepDataDir ?? process.env['MODELMUX_KEEP_CLUSTER'] === '1';
  const [assets, config, port] = await Promise.all([prometheusAdapterAssets(), chartAdapterConfig(), freePort()]);
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-prometheus-adapter-'));
  const forgetDir = keep ? () => undefined : removeDirOnDeath(dir);
  const configFile = join(dir, 'config.yaml');
  const logFile = join(dir, 'adapter.log');
  const logs = async (): Promise<string> => `--- config.yaml\n${config}\n--- prometheus-adapter\n${await readFile(logFile, 'utf8').catch(() => '')}`;
  let proc: ReturnType<typeof spawnManaged> | undefined;
  let exited = false;
  const stop = async (): Promise<void> => {
    await unregisterAggregatedServer(cp, GROUPS);
    await proc?.stop(5000);
    if (!keep) await rm(dir, { recursive: true, force: true });
    forgetDir();
  };
  try {
    await writeFile(configFile, config);
    const ca = await createCertificateAuthority(dir, 'modelmux-test-prometheus-adapter-ca');
    const [serving, kubeconfig] = await Promise.all([
      issueAggregatedServingCertificate(dir, ca, SERVICE, NAMESPACE),
      // system:masters: the adapter's RBAC is its chart's to test, not ours.
      cp.userKubeconfig('prometheus-adapter', ['system:masters']),
      cp.kubectl(['create', 'namespace', NAMESPACE]),
    ]);
    proc = spawnManaged(
      join(assets, 'adapter'),
      [
        ...aggregatedServerArgs(port, serving, dir, kubeconfig),
        `--prometheus-url=${prometheusUrl}`,
        `--config=${configFile}`,
        '--metrics-relist-interval=2s',
        // Series seen in the last minute count: a pool just scaled to zero keeps its metric names.
        '--metrics-max-age=1m',
        '--v=2',
      ],
      { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: dir }, logFile },
    );
    void proc.exited.then(() => (exited = true));
    await registerAggregatedServer(cp, { service: SERVICE, namespace: NAMESPACE, port, ca, groups: GROUPS }, () => (exited ? 'prometheus-adapter exited' : undefined));
  } catch (err) {
    const text = await logs();
    await stop();
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${text.slice(-4000)}`, { cause: err });
  }
  return { logs, stop };
}
