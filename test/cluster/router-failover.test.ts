import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { MultiplexedDeploymentStatus } from '../../common/resource.js';
import type { ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { getItems, getJson } from '../../harness/kube-json.js';
import { startLoad, type LoadGenerator, type LoadTally } from '../../harness/load-generator.js';
import { parsePrometheus } from '../../harness/modelmux-process.js';
import type { NodeAgent } from '../../harness/node-agent.js';
import { startOperator, type OperatorProcess } from '../../harness/operator-process.js';
import type { RouterProcess } from '../../harness/router-process.js';
import { isReady, s3PoolManifest, startS3PoolCluster, uploadWineModels, type S3PoolCluster } from '../../harness/s3-pool.js';

// Issue 35 in a real control plane: replica pods made by the operator and run by the node
// agent, a router with kube discovery in front, steady load through it, and pods going away
// as Kubernetes takes them away: `kubectl delete pod`, and a rollout during which the operator
// is killed. The router drops a pod once it has a deletionTimestamp and retries elsewhere the
// tries still waiting there; the replica, on SIGTERM, finishes what it has, and refuses with
// x-modelmux-overloaded what comes later, which the router also retries (ADR 0030). Not one
// request of the load may fail.

jest.setTimeout(300_000);

const MODELS = Array.from({ length: 6 }, (_, i) => `wine-${i}`);
const CLIENTS = 6;
/** Each test's own bound; the cluster starts in beforeAll. */
const TEST_MS = 90_000;

interface Mxd {
  metadata: { generation: number };
  status?: MultiplexedDeploymentStatus;
}

const maxModelsOf = (p: V1Pod): string | undefined => p.spec?.containers[0]?.env?.find((e) => e.name === 'MODELMUX_MAX_MODELS')?.value;

describe('replica pods going away under load, behind a router with kube discovery', () => {
  let cluster: S3PoolCluster;
  let cp: ControlPlane;
  let agent: NodeAgent;
  let router: RouterProcess;
  /** The cluster's operator, then the one started after it is killed. */
  let operator: OperatorProcess;
  let load: LoadGenerator | undefined;

  const pods = async (): Promise<V1Pod[]> => getItems<V1Pod>(cp, ['pods', '-l', 'modelmux.io/deployment=wine']);
  /** Three ready pods, none being deleted, all with `maxModels`, and the router routing to exactly them. */
  const settled = async (maxModels: number): Promise<V1Pod[]> =>
    eventually(
      async () => {
        const all = await pods();
        const live = all.filter((p) => p.metadata?.deletionTimestamp === undefined && isReady(p) && maxModelsOf(p) === String(maxModels));
        if (all.length !== 3 || live.length !== 3) throw new Error(`pods ${JSON.stringify(all.map((p) => [p.metadata?.name, isReady(p), maxModelsOf(p), p.metadata?.deletionTimestamp]))}`);
        const routes = (await (await fetch(`${router.adminUrl}/routes`)).json()) as { routes: { prefix: string; replicas: { name: string }[] }[] };
        const routed = routes.routes
          .find((r) => r.prefix === '/wine')
          ?.replicas.map((r) => r.name)
          .sort();
        expect(routed).toEqual(live.map((p) => p.metadata?.name).sort());
        return live;
      },
      80_000,
      500,
    );
  const report = (what: string, tally: LoadTally, extra: Record<string, unknown>): void => {
    process.stdout.write(`${what}: ${tally.failed} of ${tally.ok + tally.failed} requests failed ${JSON.stringify(tally.causes)}; ${JSON.stringify(extra)}\n`);
  };
  /** Starts the clients and lets them run `warmMs`: every request so far must have succeeded. */
  const loadFor = async (warmMs: number): Promise<LoadGenerator> => {
    const started = startLoad({ url: `${router.url}/wine`, models: MODELS });
    load = started;
    started.setClients(CLIENTS);
    await sleep(warmMs);
    const before = started.mark();
    expect(before).toMatchObject({ failed: 0 });
    expect(before.ok).toBeGreaterThan(0);
    return started;
  };
  const retries = async (): Promise<Record<string, number>> => {
    const m = await router.metrics();
    return Object.fromEntries([...m].filter(([k]) => k.startsWith('modelmux_router_retries_total{')).map(([k, v]) => [/reason="([^"]+)"/.exec(k)?.[1] ?? k, v]));
  };

  /** The pool: three replicas, `maxModels` slots each. */
  const manifest = (maxModels: number): string => s3PoolManifest(cluster.s3, { name: 'wine', replicas: 3, maxModelsPerReplica: maxModels });

  beforeAll(async () => {
    const started = await startS3PoolCluster({ router: true, fill: (s3) => uploadWineModels(s3, 'wine', MODELS.length) });
    cluster = started;
    ({ cp, agent, router, operator } = started);
    await cp.kubectl(['apply', '-f', '-'], { input: manifest(6) });
    await settled(6);
  }, 300_000);

  afterEach(async () => {
    await load?.stop();
    load = undefined;
  });

  afterAll(async () => {
    if (operator !== cluster?.operator) await operator?.stop();
    await cluster?.stop();
  }, 60_000);

  it(
    'loses no request when a serving replica pod is deleted with kubectl, and routes to its replacement',
    async () => {
      const running = await loadFor(3000);
      // Placement may put all six models on two of the three pods; the victim is the pod that has served most.
      const servedBy = await Promise.all(
        (await settled(6)).map(async (p) => ({
          name: p.metadata?.name ?? '',
          served: parsePrometheus(await (await fetch(`http://${p.status?.podIP ?? ''}:8080/metrics`)).text()).get('modelmux_replica_requests_total') ?? 0,
        })),
      );
      const { name, served } = servedBy.reduce((a, b) => (b.served > a.served ? b : a));
      expect(served).toBeGreaterThan(0);
      running.mark();
      await cp.kubectl(['delete', 'pod', name, '--wait=false']);
      // Its process is gone and a new pod serves in its place.
      await eventually(() => expect(agent.pods().map((p) => p.name)).not.toContain(name), 60_000, 250);
      const after = await settled(6);
      expect(after.map((p) => p.metadata?.name)).not.toContain(name);
      await sleep(2000);
      const during = running.mark();
      report('kubectl delete pod under load', during, { deleted: name, servedBefore: served, retries: await retries() });
      expect(during.failed).toBe(0);
      expect(during.ok).toBeGreaterThan(0);
    },
    TEST_MS,
  );

  it(
    'loses no request when the operator is killed during a rollout, which completes once another operator leads',
    async () => {
      const running = await loadFor(2000);
      await cp.kubectl(['apply', '-f', '-'], { input: manifest(5) });
      // The rollout is under way: a pod of the new template exists, not all are updated yet.
      const midway = await eventually(
        async () => {
          const d = (await getItems<V1Deployment>(cp, ['deployments', '-l', 'modelmux.io/deployment=wine']))[0];
          const updated = d?.status?.updatedReplicas ?? 0;
          if (!(updated >= 1 && updated < 3 && (await pods()).some((p) => maxModelsOf(p) === '5'))) throw new Error(`deployment status ${JSON.stringify(d?.status)}`);
          return updated;
        },
        60_000,
        200,
      );
      operator.process.child.kill('SIGKILL');
      await operator.process.exited;
      // Another operator takes the Lease once the dead one's record has not changed for its duration (4 s).
      operator = await startOperator(cp.kubeconfigPath);
      await settled(5);
      const status = await eventually(
        async () => {
          const m = await getJson<Mxd>(cp, ['mxd', 'wine']);
          const ready = m?.status?.conditions?.find((c) => c.type === 'Ready');
          if (m?.status?.observedGeneration !== m?.metadata.generation || ready?.status !== 'True' || m?.status?.readyReplicas !== 3) throw new Error(`status ${JSON.stringify(m?.status)}`);
          return m?.status;
        },
        30_000,
        500,
      );
      await sleep(2000);
      const during = running.mark();
      report('operator SIGKILL during a rollout under load', during, { updatedWhenKilled: midway, retries: await retries(), readyReplicas: status?.readyReplicas });
      expect(during.failed).toBe(0);
      expect(during.ok).toBeGreaterThan(0);
    },
    TEST_MS,
  );
});
