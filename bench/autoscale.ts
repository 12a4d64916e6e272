import { CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import { API_GROUP, API_VERSION } from '../common/names.js';
import { type OptionSpecs, intString } from '../common/config.js';
import {
  answered,
  autoscalingSpec,
  growUnderLoad,
  HEAVY_CLIENTS,
  livePods,
  MAX_REPLICAS,
  shrinkOnLightLoad,
  startAutoscalingCluster,
  waitForReadyPods,
  wineManifest,
  type AutoscalingCluster,
  type WineMxd,
} from '../harness/autoscaling-pool.js';
import { startPrometheusAdapter, type PrometheusAdapter } from '../harness/prometheus-adapter.js';
import { isReady } from '../harness/s3-pool.js';
import { runBench, type BenchRun } from './lib/cli-options.js';
import { fmt } from './lib/markdown.js';
import { writeReport, type BenchReport } from './lib/report.js';

/**
 * `npm run bench:autoscale`: how fast the operator's own HPA (spec.autoscaling, read through
 * prometheus-adapter with the chart's rules) follows a step load, and what it costs clients.
 * The cluster is the cluster tests' (harness/autoscaling-pool.ts: control plane with a 2 s
 * HPA sync period, node agent running the replica pods, Prometheus scraping them every second,
 * a router with kube discovery): it is what this measures, so it is shared from harness/, not
 * rebuilt here. Each round: HEAVY_CLIENTS closed-loop clients
 * from one replica to MAX_REPLICAS, then one client until the pool is back to one. Not part of
 * any test run. Writes bench/results/autoscale.{json,md}.
 */

const schema = z.object({
  rounds: intString(1, 20).default(3),
  targetOngoingRequests: z.coerce.number().positive().max(1000).default(2),
  scaleDownWindowSeconds: intString(0, 3600).default(10),
});
type Options = z.infer<typeof schema>;
const specs: OptionSpecs<typeof schema.shape> = {
  rounds: { flag: 'rounds', help: 'Step-up and step-down rounds (default 3).' },
  targetOngoingRequests: { flag: 'target-ongoing-requests', help: 'spec.autoscaling.targetOngoingRequests: in-flight requests per replica the HPA aims for (default 2).' },
  scaleDownWindowSeconds: {
    flag: 'scale-down-window-seconds',
    help: "The HPA's scale-down stabilisation window; surplus replicas then go at once (default 10; the operator's own default is 300, one replica a minute).",
  },
};

interface Round {
  /** From the load's start: the HPA first raised spec.replicas; the first new replica answered a request; all MAX_REPLICAS ready. */
  upDecisionMs: number | undefined;
  firstNewServingMs: number | undefined;
  allReadyMs: number;
  /** From the load's fall to one pod left. */
  downMs: number;
  upRequests: { ok: number; failed: number };
  downRequests: { ok: number; failed: number };
  coldestRemoved: boolean;
}

/**
 * Watches the pool while it grows: when spec.replicas first rises above one, and when a replica
 * that was not there at the start first answers a request. Reads through the API client, not
 * kubectl: a process per look would lag the decisions by a second on a loaded machine. Stops
 * when `signal` aborts.
 */
async function watchGrowth(cluster: AutoscalingCluster, startedAt: number, first: readonly string[], signal: AbortSignal): Promise<{ decisionMs?: number; servingMs?: number }> {
  const kc = cluster.cp.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const seen: { decisionMs?: number; servingMs?: number } = {};
  while (!signal.aborted && (seen.decisionMs === undefined || seen.servingMs === undefined)) {
    if (seen.decisionMs === undefined) {
      const m = (await custom.getNamespacedCustomObject({ group: API_GROUP, version: API_VERSION, namespace: 'default', plural: 'multiplexeddeployments', name: 'wine' }).catch(() => undefined)) as
        WineMxd | undefined;
      if ((m?.spec.replicas ?? 1) > 1) seen.decisionMs = Date.now() - startedAt;
    }
    if (seen.servingMs === undefined) {
      const pods = await core.listNamespacedPod({ namespace: 'default', labelSelector: 'modelmux.io/deployment=wine' }).catch(() => ({ items: [] as V1Pod[] }));
      const fresh = pods.items.filter((p) => isReady(p) && !first.includes(p.metadata?.name ?? ''));
      const counts = await Promise.all(fresh.map((p) => answered(p).catch(() => 0)));
      if (counts.some((n) => n > 0)) seen.servingMs = Date.now() - startedAt;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return seen;
}

function report(o: Options, rounds: readonly Round[]): BenchReport {
  const s = (ms: number | undefined): string => fmt(ms === undefined ? undefined : ms / 1000, 1);
  const rows = rounds.map((r, i) => [
    String(i + 1),
    s(r.upDecisionMs),
    s(r.firstNewServingMs),
    s(r.allReadyMs),
    s(r.downMs),
    `${r.upRequests.failed + r.downRequests.failed} of ${r.upRequests.ok + r.upRequests.failed + r.downRequests.ok + r.downRequests.failed}`,
    r.coldestRemoved ? 'yes' : '**no**',
  ]);
  const failed = rounds.reduce((n, r) => n + r.upRequests.failed + r.downRequests.failed, 0);
  return {
    title: "Autoscaling with the operator's HPA: a step load",
    setup:
      `The cluster tests' cluster (kube-apiserver, kube-controller-manager with a 2 s HPA sync period, scheduler, the test node agent running replica pods as processes, ` +
      `Prometheus scraping them every 1 s, a router with kube discovery) and prometheus-adapter v0.12.0 with the chart's rules. ` +
      `A MultiplexedDeployment of 8 models, 2 per replica, with \`spec.autoscaling\` minReplicas 1, maxReplicas ${MAX_REPLICAS}, targetOngoingRequests ${o.targetOngoingRequests}, ` +
      `a ${o.scaleDownWindowSeconds} s scale-down window removing every surplus replica at once. Each round: ${HEAVY_CLIENTS} closed-loop clients until ${MAX_REPLICAS} replicas are ready and 8 s more, ` +
      `then one client until one pod is left. Times from the load's step.`,
    sections: [
      {
        headline: true,
        table: {
          header: ['round', 'HPA raises /scale (s)', 'first new replica answers (s)', `${MAX_REPLICAS} ready (s)`, 'back to 1 after the load falls (s)', 'requests failed', 'coldest removed'],
          rows,
        },
        after: `Requests failed over all rounds: **${failed}** (target 0).`,
      },
    ],
    data: { rounds },
  };
}

async function main(run: BenchRun<Options>): Promise<void> {
  const o = run.options;
  const log = (msg: string): void => void process.stderr.write(`[bench:autoscale ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  log('starting the cluster and prometheus-adapter');
  const cluster = await startAutoscalingCluster();
  let adapter: PrometheusAdapter | undefined;
  try {
    const started = await startPrometheusAdapter(cluster.cp, cluster.prometheus.url);
    adapter = started;
    const diagnose = (): Promise<string> => cluster.describe('wine', () => started.logs());
    await cluster.cp.kubectl(['apply', '-f', '-'], {
      input: wineManifest(cluster.s3, autoscalingSpec({ minReplicas: 1, targetOngoingRequests: o.targetOngoingRequests, scaleDownWindowSeconds: o.scaleDownWindowSeconds })),
    });
    await waitForReadyPods(cluster.cp, 1, 120_000, diagnose);
    const rounds: Round[] = [];
    for (let i = 0; i < o.rounds; i++) {
      const first = (await livePods(cluster.cp)).map((p) => p.metadata?.name ?? '');
      const stopWatching = new AbortController();
      const startedAt = Date.now();
      const watching = watchGrowth(cluster, startedAt, first, stopWatching.signal);
      const up = await growUnderLoad(cluster, diagnose, () => Promise.resolve());
      stopWatching.abort();
      const seen = await watching;
      const down = await shrinkOnLightLoad(cluster, up.load, diagnose);
      const round: Round = {
        upDecisionMs: seen.decisionMs,
        firstNewServingMs: seen.servingMs,
        allReadyMs: up.readyAfterMs,
        downMs: down.afterMs,
        upRequests: { ok: up.tally.ok, failed: up.tally.failed },
        downRequests: { ok: down.tally.ok, failed: down.tally.failed },
        coldestRemoved: down.survivor === down.hottest,
      };
      log(`round ${i + 1}: ${JSON.stringify(round)}`);
      rounds.push(round);
    }
    await writeReport(run, report(o, rounds));
  } finally {
    await adapter?.stop();
    await cluster.stop();
  }
}

await runBench({ name: 'autoscale', summary: "A step load against the test cluster's operator HPA: time to scale up and down, requests failed.", schema, specs }, main);
