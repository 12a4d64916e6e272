import { jest } from '@jest/globals';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { MultiplexedDeploymentStatus } from '../../common/resource.js';
import { startControlPlane, type ControlPlane } from '../../harness/control-plane.js';
import { eventually } from '../../harness/eventually.js';
import { getItems, getJson } from '../../harness/kube-json.js';
import { startNodeAgent, type NodeAgent } from '../../harness/node-agent.js';
import { startOperator, type OperatorProcess } from '../../harness/operator-process.js';
import { operatorRbac } from '../helpers/operator-rbac.js';

// The operator against a real control plane: owned objects, status, scheduling, scale,
// rollout, restarts of the operator and of the API server, and garbage collection. Replica
// readiness and traffic are in operator-e2e.test.ts. The operator runs as a ServiceAccount
// holding exactly the rules of operator/rbac-rules.ts (what the chart grants), so a missing
// permission fails here.

const NODE_GPUS = 6;
jest.setTimeout(120_000);

interface Mxd {
  metadata: { uid: string; generation: number };
  spec: { replicas: number };
  status?: MultiplexedDeploymentStatus;
}

const manifest = (name: string, extra = ''): string => `apiVersion: modelmux.io/v1alpha1
kind: MultiplexedDeployment
metadata: { name: ${name}, namespace: default }
spec:
  replicas: 2
  routePrefix: /${name.slice(0, 60)}
  modelSource: { uri: "file:///nonexistent-models" }
  maxModelsPerReplica: 2
  resources: { limits: { nvidia.com/gpu: 1 }, requests: { cpu: 100m, memory: 64Mi } }
${extra}`;

const OPERATOR_NS = 'modelmux-system';

const podsOf = (cp: ControlPlane, name: string): Promise<V1Pod[]> => getItems<V1Pod>(cp, ['pods', '-l', `modelmux.io/deployment=${name}`]);
const live = (pods: V1Pod[]): V1Pod[] => pods.filter((p) => p.metadata?.deletionTimestamp === undefined);
const envOf = (pod: V1Pod, name: string): string | undefined => pod.spec?.containers[0]?.env?.find((e) => e.name === name)?.value;
const condition = (mxd: Mxd | undefined, type: string) => mxd?.status?.conditions?.find((c) => c.type === type);

/** Sum of a counter's samples whose labels include `labels`, from a /metrics page. */
function counter(page: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const m of page.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))) {
    const set = Object.fromEntries([...(m[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l): [string, string] => [l[1] ?? '', l[2] ?? '']));
    if (Object.entries(labels).every(([k, v]) => set[k] === v)) sum += Number(m[2]);
  }
  return sum;
}
const metricsOf = async (o: OperatorProcess): Promise<string> => (await fetch(`${o.metricsUrl}/metrics`)).text();
const apiRequests = (page: string, caller: string, verb: string): number => counter(page, 'modelmux_operator_api_requests_total', { caller, verb });

describe('the operator against a real control plane', () => {
  let cp: ControlPlane;
  let agent: NodeAgent;
  let operator: OperatorProcess;
  let operatorKubeconfig: string;
  const operatorArgs = ['--leader-election-namespace', OPERATOR_NS];

  beforeAll(async () => {
    cp = await startControlPlane();
    await cp.kubectl(['apply', '-f', 'crds/']);
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/multiplexeddeployments.modelmux.io', '--timeout=60s']);
    agent = await startNodeAgent(cp, { capacity: { gpus: NODE_GPUS } });
    await cp.kubectl(['apply', '-f', '-'], { input: operatorRbac(OPERATOR_NS) });
    operatorKubeconfig = await cp.serviceAccountKubeconfig(OPERATOR_NS, 'modelmux-operator');
    operator = await startOperator(operatorKubeconfig, operatorArgs);
  }, 240_000);

  afterAll(async () => {
    await operator?.stop();
    await agent?.stop();
    await cp?.stop();
  }, 60_000);

  it('creates the replica Deployment, headless Service and replica RBAC, all owned by the resource', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: manifest('wine') });
    const mxd = (await getJson<Mxd>(cp, ['mxd', 'wine']))!;
    const objects = await eventually(async () => {
      const all = await Promise.all(
        ['deployment/wine', 'service/wine', 'serviceaccount/wine-replica', 'role/wine-replica', 'rolebinding/wine-replica'].map((r) => getJson<{ metadata: { ownerReferences?: unknown[] } }>(cp, [r])),
      );
      if (all.some((o) => o === undefined)) throw new Error('not all created yet');
      return all;
    });
    for (const o of objects) {
      expect(o?.metadata.ownerReferences).toEqual([
        { apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: 'wine', uid: mxd.metadata.uid, controller: true, blockOwnerDeletion: true },
      ]);
    }
    const svc = (await getJson<{ spec: { clusterIP: string; selector: Record<string, string> } }>(cp, ['service/wine']))!;
    expect(svc.spec.clusterIP).toBe('None');
    expect(svc.spec.selector).toEqual({ 'modelmux.io/deployment': 'wine' });
    const role = (await getJson<{ rules: unknown[] }>(cp, ['role/wine-replica']))!;
    expect(role.rules).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] }]);
  });

  it('gives scheduled pods that carry the GPU request, run as the replica service account', async () => {
    const pods = await eventually(async () => {
      const p = live(await podsOf(cp, 'wine')).filter((x) => x.spec?.nodeName === agent.nodeName);
      if (p.length !== 2) throw new Error(`${p.length} scheduled pods`);
      return p;
    }, 60_000);
    for (const pod of pods) {
      const c = pod.spec?.containers[0];
      expect(c?.resources?.limits?.['nvidia.com/gpu']).toBe('1');
      expect(c?.args).toEqual(['replica']);
      expect(c?.image).toBe('modelmux:test');
      expect(pod.spec?.serviceAccountName).toBe('wine-replica');
      expect(pod.spec?.securityContext?.runAsNonRoot).toBe(true);
    }
    // The node agent runs them as processes: they got their own loopback address.
    await eventually(() => {
      const running = agent.pods().filter((p) => p.name.startsWith('wine-'));
      if (running.length !== 2) throw new Error(`${running.length} running`);
    }, 30_000);
  });

  it('reports observedGeneration, replica counts and the selector in status', async () => {
    const mxd = await eventually(async () => {
      const m = await getJson<Mxd>(cp, ['mxd', 'wine']);
      if (m?.status?.replicas !== 2) throw new Error(`status ${JSON.stringify(m?.status)}`);
      return m;
    }, 30_000);
    expect(mxd.status?.observedGeneration).toBe(mxd.metadata.generation);
    expect(mxd.status?.selector).toBe('modelmux.io/deployment=wine');
    expect(condition(mxd, 'Degraded')?.status).toBe('False');
    expect(condition(mxd, 'Ready')?.observedGeneration).toBe(mxd.metadata.generation);
  });

  it('reconciles a steady resource from its informers’ caches, and applies nothing when what changed is not its spec', async () => {
    const before = await metricsOf(operator);
    // A metadata change wakes a reconcile through the resource's informer; the spec, and so
    // every object the resource owns, stays as it is.
    await cp.kubectl(['annotate', 'mxd', 'wine', `example.com/touched=${Date.now()}`, '--overwrite']);
    const reconciles = (page: string): number => counter(page, 'modelmux_operator_reconciles_total', { controller: 'multiplexeddeployment' });
    const after = await eventually(async () => {
      const page = await metricsOf(operator);
      if (reconciles(page) <= reconciles(before)) throw new Error('no reconcile yet');
      return page;
    }, 30_000);
    expect(apiRequests(after, 'reconcile', 'apply')).toBe(apiRequests(before, 'reconcile', 'apply'));
    // The applies that made the ServiceAccount, Role, RoleBinding, Service and Deployment reached the API server.
    expect(apiRequests(after, 'reconcile', 'apply')).toBeGreaterThanOrEqual(5);
    for (const verb of ['get', 'list', 'watch']) expect([verb, apiRequests(after, 'reconcile', verb)]).toEqual([verb, 0]);
    // Discovery (kind to path) was asked once per API version, on the first reconcile, not again.
    expect(apiRequests(after, 'reconcile', 'discovery')).toBe(apiRequests(before, 'reconcile', 'discovery'));
    expect(apiRequests(after, 'reconcile', 'discovery')).toBeGreaterThan(0);
    // The reads happen, in the informers: a list and a watch for each of the nine kinds.
    expect(apiRequests(after, 'informer', 'list')).toBeGreaterThanOrEqual(9);
    expect(apiRequests(after, 'informer', 'watch')).toBeGreaterThanOrEqual(9);
  });

  it('leaves pods Pending when they ask for more GPUs than the node has, and says so in status', async () => {
    await cp.kubectl(['apply', '-f', '-'], { input: manifest('greedy').replace('nvidia.com/gpu: 1', `nvidia.com/gpu: ${NODE_GPUS + 2}`) });
    const degraded = await eventually(async () => {
      const c = condition(await getJson<Mxd>(cp, ['mxd', 'greedy']), 'Degraded');
      if (c?.status !== 'True') throw new Error(`Degraded ${JSON.stringify(c)}`);
      return c;
    }, 60_000);
    expect(degraded.reason).toBe('Unschedulable');
    expect(degraded.message).toContain('Insufficient nvidia.com/gpu');
    const pods = live(await podsOf(cp, 'greedy'));
    expect(pods.length).toBeGreaterThan(0);
    for (const p of pods) expect(p.status?.phase).toBe('Pending');
    expect(condition(await getJson<Mxd>(cp, ['mxd', 'greedy']), 'Ready')?.status).toBe('False');
    await cp.kubectl(['delete', 'mxd', 'greedy']);
  });

  it('records a Warning event and Degraded when an owned object cannot be created', async () => {
    // A name longer than a label value may be (63) is a valid resource name but not a valid selector.
    const name = `x${'y'.repeat(70)}`;
    await cp.kubectl(['apply', '-f', '-'], { input: manifest(name) });
    const degraded = await eventually(async () => {
      const c = condition(await getJson<Mxd>(cp, ['mxd', name]), 'Degraded');
      if (c?.reason !== 'ReconcileError') throw new Error(`Degraded ${JSON.stringify(c)}`);
      return c;
    }, 30_000);
    expect(degraded.status).toBe('True');
    expect(degraded.message).toContain('must be no more than 63 bytes');
    const events = await getItems<{ reason: string; type: string; involvedObject: { name: string } }>(cp, ['events', '--field-selector', `involvedObject.name=${name}`]);
    expect(events.some((e) => e.type === 'Warning' && e.reason === 'ReconcileError')).toBe(true);
    await cp.kubectl(['delete', 'mxd', name]);
  });

  it('marks a spec the CRD lets through but the schema refuses as Degraded/InvalidSpec, terminally', async () => {
    // An empty resource name passes the CRD (it cannot express propertyNames) but not zod.
    await cp.kubectl(['apply', '-f', '-'], { input: manifest('oddres').replace('requests: { cpu: 100m, memory: 64Mi }', 'requests: { "": "1" }') });
    const degraded = await eventually(async () => {
      const c = condition(await getJson<Mxd>(cp, ['mxd', 'oddres']), 'Degraded');
      if (c?.reason !== 'InvalidSpec') throw new Error(`Degraded ${JSON.stringify(c)}`);
      return c;
    }, 30_000);
    expect(degraded.message).toContain('spec.resources.requests');
    expect(await getJson(cp, ['deployment', 'oddres'])).toBeUndefined();
    const text = await (await fetch(`${operator.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/modelmux_operator_reconciles_total\{controller="multiplexeddeployment",result="terminal"\} [1-9]/);
    await cp.kubectl(['delete', 'mxd', 'oddres']);
  });

  it('creates an HPA on the resource’s /scale when autoscaling is set, and removes it when unset', async () => {
    await cp.kubectl(['patch', 'mxd', 'wine', '--type=merge', '-p', '{"spec":{"autoscaling":{"minReplicas":2,"maxReplicas":4,"targetOngoingRequests":2.5}}}']);
    const hpa = await eventually(async () => {
      const h = await getJson<{ spec: Record<string, unknown> }>(cp, ['hpa', 'wine']);
      if (!h) throw new Error('no HPA yet');
      return h;
    }, 30_000);
    expect(hpa.spec['scaleTargetRef']).toEqual({ apiVersion: 'modelmux.io/v1alpha1', kind: 'MultiplexedDeployment', name: 'wine' });
    expect(hpa.spec['minReplicas']).toBe(2);
    expect(hpa.spec['maxReplicas']).toBe(4);
    expect(hpa.spec['metrics']).toEqual([{ type: 'Pods', pods: { metric: { name: 'modelmux_replica_ongoing_requests' }, target: { type: 'AverageValue', averageValue: '2500m' } } }]);
    await cp.kubectl(['patch', 'mxd', 'wine', '--type=json', '-p', '[{"op":"remove","path":"/spec/autoscaling"}]']);
    await eventually(async () => {
      if (await getJson(cp, ['hpa', 'wine'])) throw new Error('HPA still there');
    }, 30_000);
  });

  it('follows kubectl scale mxd/<name> --replicas=5 with five pods', async () => {
    await cp.kubectl(['scale', 'mxd/wine', '--replicas=5']);
    await eventually(async () => {
      const pods = live(await podsOf(cp, 'wine')).filter((p) => p.spec?.nodeName !== undefined);
      if (pods.length !== 5) throw new Error(`${pods.length} pods`);
      const m = await getJson<Mxd>(cp, ['mxd', 'wine']);
      if (m?.status?.replicas !== 5) throw new Error(`status.replicas ${String(m?.status?.replicas)}`);
    }, 60_000);
    expect((await cp.kubectl(['get', 'deployment', 'wine', '-o', 'jsonpath={.spec.replicas}'])).trim()).toBe('5');
    await cp.kubectl(['scale', 'mxd/wine', '--replicas=2']);
    await eventually(async () => {
      const pods = live(await podsOf(cp, 'wine'));
      if (pods.length !== 2) throw new Error(`${pods.length} pods`);
    }, 60_000);
  });

  it('rolls a spec change out to new pods', async () => {
    await cp.kubectl(['patch', 'mxd', 'wine', '--type=merge', '-p', '{"spec":{"maxModelsPerReplica":7}}']);
    await eventually(async () => {
      const d = await getJson<V1Deployment>(cp, ['deployment', 'wine']);
      const env = d?.spec?.template.spec?.containers[0]?.env?.find((e) => e.name === 'MODELMUX_MAX_MODELS');
      if (env?.value !== '7') throw new Error(`template env ${JSON.stringify(env)}`);
    }, 30_000);
    // A rollout creates pods from the new template (surge first: maxUnavailable is 0).
    await eventually(async () => {
      const fresh = live(await podsOf(cp, 'wine')).filter((p) => envOf(p, 'MODELMUX_MAX_MODELS') === '7');
      if (fresh.length === 0) throw new Error('no pod of the new template yet');
    }, 60_000);
  });

  it('hands over to a standby through the Lease when the leader stops, converging on changes made meanwhile', async () => {
    const standby = await startOperator(operatorKubeconfig, operatorArgs, false);
    try {
      // Two retry periods: the standby has looked at the Lease and found it held.
      await new Promise((r) => setTimeout(r, 2000));
      const leaderOf = async (o: OperatorProcess): Promise<unknown> => ((await (await fetch(`${o.metricsUrl}/readyz`)).json()) as { leader: boolean }).leader;
      expect(await leaderOf(standby)).toBe(false);
      expect(await leaderOf(operator)).toBe(true);
      expect(await standby.logs()).not.toContain('"operator started"');
      // A standby keeps its caches warm (a list of each kind) and reconciles nothing.
      const standbyPage = await eventually(async () => {
        const page = await metricsOf(standby);
        expect(apiRequests(page, 'informer', 'list')).toBeGreaterThanOrEqual(9);
        return page;
      });
      expect(counter(standbyPage, 'modelmux_operator_api_requests_total', { caller: 'reconcile' })).toBe(0);
      await operator.stop();
      await cp.kubectl(['scale', 'mxd/wine', '--replicas=3']);
      await eventually(async () => {
        expect(await leaderOf(standby)).toBe(true);
      }, 30_000);
      operator = standby;
    } catch (err) {
      await standby.stop();
      throw err;
    }
    await eventually(async () => {
      expect((await cp.kubectl(['get', 'deployment', 'wine', '-o', 'jsonpath={.spec.replicas}'])).trim()).toBe('3');
    }, 30_000);
    const lease = (await getJson<{ spec: { holderIdentity: string; leaseTransitions?: number } }>(cp, ['lease', 'modelmux-operator', '-n', OPERATOR_NS]))!;
    expect(lease.spec.holderIdentity).not.toBe('');
  });

  it('converges after the API server restarts under it (watches resume)', async () => {
    // The last test needs the garbage collector; the operator's watches are what this one checks.
    await cp.restartApiServer({ freshControllerManager: true });
    const restarts = /modelmux_operator_watch_restarts_total\{resource="multiplexeddeployments"\} (\d+)/.exec(await (await fetch(`${operator.metricsUrl}/metrics`)).text());
    expect(Number(restarts?.[1] ?? 0)).toBeGreaterThan(0);
    // A change after the restart only reaches the operator through a re-established watch.
    await cp.kubectl(['scale', 'mxd/wine', '--replicas=2']);
    await eventually(async () => {
      expect((await cp.kubectl(['get', 'deployment', 'wine', '-o', 'jsonpath={.spec.replicas}'])).trim()).toBe('2');
    }, 60_000);
    // Drift is repaired too: an owned object edited by hand comes back.
    await cp.kubectl(['label', 'service', 'wine', 'app.kubernetes.io/managed-by-', '--overwrite']);
    await cp.kubectl(['delete', 'role', 'wine-replica']);
    await cp.kubectl(['patch', 'deployment', 'wine', '--type=merge', '-p', '{"spec":{"replicas":4}}']);
    await eventually(async () => {
      expect((await cp.kubectl(['get', 'deployment', 'wine', '-o', 'jsonpath={.spec.replicas}'])).trim()).toBe('2');
      expect(await getJson(cp, ['role/wine-replica'])).toBeDefined();
      expect((await cp.kubectl(['get', 'service', 'wine', '-o', 'jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}'])).trim()).toBe('modelmux-operator');
    }, 30_000);
  });

  it('deletes everything it created when the resource is deleted', async () => {
    await cp.kubectl(['delete', 'mxd', 'wine', '--wait=true']);
    await eventually(async () => {
      for (const r of ['deployment/wine', 'service/wine', 'serviceaccount/wine-replica', 'rolebinding/wine-replica']) {
        if (await getJson(cp, [r])) throw new Error(`${r} still there`);
      }
      const pods = await podsOf(cp, 'wine');
      // Which pod and in what state, so a failure says whether the node agent or the GC held it.
      const left = pods.map((p) => ({
        name: p.metadata?.name,
        node: p.spec?.nodeName,
        phase: p.status?.phase,
        deleting: p.metadata?.deletionTimestamp,
        owners: p.metadata?.ownerReferences?.map((o) => o.name),
        finalizers: p.metadata?.finalizers,
      }));
      if (pods.length > 0) throw new Error(`${pods.length} pods left: ${JSON.stringify(left)}; agent runs ${JSON.stringify(agent.pods().map((r) => r.name))}`);
    }, 90_000);
  });

  it('exports reconcile metrics', async () => {
    const text = await (await fetch(`${operator.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/modelmux_operator_reconciles_total\{controller="multiplexeddeployment",result="(success|requeue)"\} [1-9]/);
    expect(text).toContain('modelmux_operator_reconcile_duration_seconds_bucket');
    expect(text).toMatch(/modelmux_operator_leader 1/);
    expect(text).toContain('modelmux_operator_queue_depth{controller="multiplexeddeployment"}');
    expect(text).toContain('modelmux_operator_queue_depth{controller="modelroute"}');
  });
});
