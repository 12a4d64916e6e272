import type { V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import {
  growUnderLoad,
  MAX_REPLICAS,
  shrinkOnLightLoad,
  startAutoscalingCluster,
  TARGET_PER_REPLICA,
  type AutoscalingCluster,
  type ScaleDown,
  type ScaleUp,
  type WineMxd,
} from '../../harness/autoscaling-pool.js';
import { eventually } from '../../harness/eventually.js';
import { getJson } from '../../harness/kube-json.js';
import type { LoadGenerator, LoadTally } from '../../harness/load-generator.js';
import type { RouterProcess } from '../../harness/router-process.js';
import { expectClose, expected, post, v2Body, v2Outputs, wineRows } from '../integration/replica/wine-fixtures.js';

// What the autoscaling cluster tests (KEDA's ScaledObject, the operator's own HPA) share around
// the pool harness/autoscaling-pool.ts runs: the cluster and its autoscaler for a describe
// block, and the same checks on the outcome, whichever autoscaler moved it.

/** A Kubernetes quantity as a number ("2500m" is 2.5). */
export const quantity = (q: string | undefined): number => (q === undefined ? NaN : q.endsWith('m') ? Number.parseFloat(q) / 1000 : Number.parseFloat(q));

/** What scales the pool beside the cluster: KEDA, or prometheus-adapter under the operator's HPA. */
export interface Autoscaler {
  logs(): Promise<string>;
  stop(): Promise<void>;
}

/** hpa and diagnose are closures, for a test to take out of the suite and pass on. */
export interface AutoscalingSuite<A extends Autoscaler> {
  readonly cluster: AutoscalingCluster;
  readonly autoscaler: A;
  /** The autoscaler's HPA. */
  hpa: () => Promise<V2HorizontalPodAutoscaler | undefined>;
  /** The HPA, the pool, Prometheus and the autoscaler's logs, for failure messages. */
  diagnose: () => Promise<string>;
  /**
   * growUnderLoad, once the metric the HPA reads (the API server path `metricPath`, its values
   * summed) is above the per-replica target. The load goes on for shrink().
   */
  grow(metricPath: string): Promise<ScaleUp & { seen: number }>;
  /** shrinkOnLightLoad on grow()'s load. */
  shrink(): Promise<ScaleDown>;
}

/**
 * Starts the autoscaling cluster and `start`'s autoscaler in beforeAll, stops them (and a load
 * left running) in afterAll: call it in a describe block.
 */
export function autoscalingSuite<A extends Autoscaler>(hpaName: string, start: (cluster: AutoscalingCluster) => Promise<A>): AutoscalingSuite<A> {
  let cluster: AutoscalingCluster | undefined;
  let autoscaler: A | undefined;
  let load: LoadGenerator | undefined;
  beforeAll(async () => {
    cluster = await startAutoscalingCluster();
    autoscaler = await start(cluster);
  }, 300_000);
  afterAll(async () => {
    await load?.stop();
    await autoscaler?.stop();
    await cluster?.stop();
  }, 60_000);
  const started = <T>(x: T | undefined): T => {
    if (x === undefined) throw new Error('the cluster or its autoscaler did not start');
    return x;
  };
  const suite: AutoscalingSuite<A> = {
    get cluster() {
      return started(cluster);
    },
    get autoscaler() {
      return started(autoscaler);
    },
    hpa: () => suite.cluster.hpa(hpaName),
    diagnose: () => suite.cluster.describe(hpaName, () => suite.autoscaler.logs()),
    grow: async (metricPath) => {
      const { cp } = suite.cluster;
      const up = await growUnderLoad(suite.cluster, suite.diagnose, () =>
        eventually(
          async () => {
            const raw = await cp.kubectl(['get', '--raw', metricPath]);
            const total = (JSON.parse(raw) as { items: { value: string }[] }).items.reduce((sum, i) => sum + quantity(i.value), 0);
            if (!(total > TARGET_PER_REPLICA)) throw new Error(`metric ${raw}`);
            return total;
          },
          60_000,
          1000,
        ),
      );
      load = up.load;
      return up;
    },
    shrink: async () => {
      if (!load) throw new Error('the scale-up test did not start the load');
      const down = await shrinkOnLightLoad(suite.cluster, load, suite.diagnose);
      load = undefined;
      return down;
    },
  };
  return suite;
}

interface FromZero {
  /** Requests the router held at once. */
  readonly held: number;
  /** Each answer's status (with its error code when not 200), outputs and time from the send. */
  readonly answers: readonly { status: string; outputs: number[]; ms: number }[];
  /** The outputs the model gives for the request's rows. */
  readonly expectedOutputs: number[];
}

/**
 * Sends `n` requests to the pool at zero, each once and without retry, checks that the router
 * holds them all (the demand the autoscaler wakes on), and resolves once they are answered.
 */
async function sendToEmptyPool(router: RouterProcess, n: number): Promise<FromZero> {
  const startedAt = Date.now();
  const rows = wineRows(2, 3);
  const answers = Promise.all(
    Array.from({ length: n }, async () => {
      const a = await post(`${router.url}/wine/v2/models/wine-3/infer`, v2Body(rows));
      const ok = a.status === 200;
      return { status: `${a.status}${ok ? '' : ` ${String(a.body['error'])}`}`, outputs: ok ? v2Outputs(a) : [], ms: Date.now() - startedAt };
    }),
  );
  const held = await eventually(
    async () => {
      const h = (await router.metrics()).get('modelmux_router_held_requests') ?? 0;
      if (h !== n) throw new Error(`${h} held`);
      return h;
    },
    10_000,
    100,
  );
  return { held, answers: await answers, expectedOutputs: expected('wine-3', rows) };
}

/** Every request of a move counted and answered right: some, and none failed. */
function expectNoneFailed(tally: LoadTally): void {
  expect(tally.ok).toBeGreaterThan(0);
  expect(tally).toEqual({ ok: tally.ok, failed: 0, causes: {} });
}

/** Every held request answered with the model's outputs: none refused, none retried by the client. */
function expectAllAnswered(r: FromZero): void {
  expect(r.answers.map((a) => a.status)).toEqual(r.answers.map(() => '200'));
  for (const a of r.answers) expectClose(a.outputs, r.expectedOutputs);
}

/** The pool grew to MAX_REPLICAS: every replica, the new ones too, answered; the HPA wants them all; no request failed. */
export async function expectScaledUp(up: ScaleUp & { seen: unknown }, hpa: () => Promise<V2HorizontalPodAutoscaler | undefined>, metric: string): Promise<void> {
  process.stdout.write(
    `scale-up: ${metric} ${String(up.seen)}, ${MAX_REPLICAS} ready after ${up.readyAfterMs} ms; requests ${JSON.stringify(up.tally)}; per replica in 8 s ${JSON.stringify(up.perReplica)}\n`,
  );
  for (const n of up.perReplica) expect(n).toBeGreaterThan(0);
  expect((await hpa())?.status?.desiredReplicas).toBe(MAX_REPLICAS);
  expectNoneFailed(up.tally);
}

/** The pool shrank to one: the HPA wants one, the coldest replicas went (pod-deletion-cost), no request failed. */
export async function expectScaledDown(down: ScaleDown, hpa: () => Promise<V2HorizontalPodAutoscaler | undefined>, note = ''): Promise<void> {
  process.stdout.write(
    `scale-down: 1 replica after ${down.afterMs} ms; requests ${JSON.stringify(down.tally)}; deletion costs at the start ${JSON.stringify(down.costs)}, left ${down.survivor}${note}\n`,
  );
  expect((await hpa())?.status?.desiredReplicas).toBe(1);
  expect(down.survivor).toBe(down.hottest);
  expectNoneFailed(down.tally);
}

/**
 * `n` requests sent once each to the pool at zero: the router held them all, the autoscaler
 * brought one replica, and every one was answered with the model's outputs; none held after.
 */
export async function expectWokenFromZero(cluster: AutoscalingCluster, n: number): Promise<void> {
  const r = await sendToEmptyPool(cluster.router, n);
  const m = await getJson<WineMxd>(cluster.cp, ['mxd', 'wine']);
  process.stdout.write(
    `scale from zero: ${r.held} requests held, answered after ${r.answers.map((a) => a.ms).join(', ')} ms (${r.answers.map((a) => a.status).join(', ')}), spec.replicas ${m?.spec.replicas}\n`,
  );
  expectAllAnswered(r);
  expect(m?.spec.replicas).toBe(1);
  expect((await cluster.router.metrics()).get('modelmux_router_held_requests')).toBe(0);
}
