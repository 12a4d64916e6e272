import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, type ControlPlane } from './control-plane.js';
import { eventually } from './eventually.js';
import { prometheusPath } from './kube-tools.js';
import { runPodDiscovery } from './pod-discovery.js';
import { podMonitorScrapeConfigs, type PodMonitor } from './pod-monitor-scrape.js';
import { removeDirOnDeath, spawnManaged } from './process-reaper.js';

export interface PrometheusServer {
  /** http://127.0.0.1:<port>, the address a KEDA trigger's serverAddress takes. */
  readonly url: string;
  /** An instant query; one number per series, keyed by the series' labels as JSON. */
  query(promql: string): Promise<{ labels: Record<string, string>; value: number }[]>;
  /** Its log, for failure messages. */
  logs(): Promise<string>;
  stop(): Promise<void>;
}

interface QueryAnswer {
  status: string;
  error?: string;
  data?: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
}

export interface PrometheusOptions {
  /** Processes outside the cluster to scrape too (a router run as a local process), as `host:port`, one job each. */
  readonly staticJobs?: Readonly<Record<string, string>>;
  /** Keep the config, data and log after stop. Default: env MODELMUX_KEEP_CLUSTER=1. */
  readonly keepDataDir?: boolean;
}

/**
 * Runs the prometheus binary (Debian's package, never its system service) on a loopback port,
 * with its data in a temp folder, scraping what `podMonitor` selects among the cluster's pods
 * (discovered by pod-discovery.ts); resolves once /-/ready answers.
 */
export async function startPrometheus(cp: Pick<ControlPlane, 'kubeConfig'>, podMonitor: PodMonitor, opts: PrometheusOptions = {}): Promise<PrometheusServer> {
  const keep = opts.keepDataDir ?? process.env['MODELMUX_KEEP_CLUSTER'] === '1';
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-prometheus-'));
  const forgetDir = keep ? () => undefined : removeDirOnDeath(dir);
  const [bin, port] = await Promise.all([prometheusPath(), freePort()]);
  const config = join(dir, 'prometheus.yml');
  const targets = join(dir, 'pod-targets.json');
  await writeFile(targets, '[]');
  // Short intervals: a test waits on decisions made from these samples.
  const scrapeConfigs = [
    ...podMonitorScrapeConfigs(podMonitor, targets),
    ...Object.entries(opts.staticJobs ?? {}).map(([job, target]) => ({ job_name: job, static_configs: [{ targets: [target] }] })),
  ];
  await writeFile(config, stringify({ global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' }, scrape_configs: scrapeConfigs }));
  const stopDiscovery = new AbortController();
  const discovery = runPodDiscovery(cp.kubeConfig(), targets, stopDiscovery.signal);
  await mkdir(join(dir, 'data'));
  const logFile = join(dir, 'prometheus.log');
  const url = `http://127.0.0.1:${port}`;
  const proc = spawnManaged(
    bin,
    [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--storage.tsdb.retention.time=1h', '--log.level=info'],
    { logFile },
  );
  const logs = (): Promise<string> => readFile(logFile, 'utf8').catch(() => '');
  let exited = false;
  void proc.exited.then(() => (exited = true));
  const stop = async (): Promise<void> => {
    stopDiscovery.abort();
    await Promise.all([discovery, proc.stop(5000)]);
    if (!keep) await rm(dir, { recursive: true, force: true });
    forgetDir();
  };
  try {
    await eventually(
      async () => {
        if (exited) throw new Error(`prometheus exited: ${await logs()}`);
        const res = await fetch(`${url}/-/ready`);
        if (res.status !== 200) throw new Error(`prometheus not ready: ${res.status}`);
      },
      60_000,
      200,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    query: async (promql) => {
      const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const answer = (await res.json()) as QueryAnswer;
      if (answer.status !== 'success' || !answer.data) throw new Error(`prometheus query ${promql}: ${answer.error ?? res.status}`);
      return answer.data.result.map((r) => ({ labels: r.metric, value: Number(r.value[1]) }));
    },
    logs,
    stop,
  };
}
