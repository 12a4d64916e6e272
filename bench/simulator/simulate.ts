import type { Random } from '../../common/clock.js';
import { Balancer, DEFAULT_RECENT_MS, type AcquireResult, type Lease, type SetTimer, type TableView } from '../../router/placement/balancer.js';
import { defaultPlacementPolicy, type PlacementPolicy } from '../../router/placement/placement.js';
import { EventQueue } from './event-queue.js';
import { modelSampler, type PatternName } from './patterns.js';
import { RayLikeRouter } from './ray-like-router.js';
import { exponential, seededRandom } from './rng.js';
import { SimReplica, type ReplicaParams } from './sim-replica.js';

/** The router surface the simulator drives: the real Balancer, or the Ray-like baseline. */
interface SimRouter {
  acquire(model: string | undefined, done: (r: AcquireResult) => void, exclude?: ReadonlySet<string>): () => void;
  release(lease: Lease): void;
  setTable(name: string, table: TableView): void;
  observe(name: string, model: string): void;
}

export type PolicyName = 'modelmux' | 'ray-like' | 'ideal';

export interface SimParams extends ReplicaParams {
  replicas: number;
  routers: number;
  models: number;
  /** Fraction of the pool's compute kept busy by the arrival rate. */
  busy: number;
  durationMs: number;
  /** Requests before this time warm the caches and are not counted. */
  warmupMs: number;
  matchTimeoutMs: number;
  /** How often replicas publish their tables, and how late router i sees them: (i + 1) × delay. */
  publishEveryMs: number;
  viewDelayMs: number;
  seed: number;
  /** Overrides of the router's placement policy (defaultPlacementPolicy otherwise). */
  policy?: Partial<PlacementPolicy>;
  tableLagMs?: number;
  /** How long a client waits before sending again after a 503. */
  clientBackoffMs: number;
}

export interface SimResult {
  policy: PolicyName;
  pattern: PatternName;
  requests: number;
  loadsPer1000: number;
  p99WaitMs: number;
  throughputPerS: number;
  retries: number;
}

export const DEFAULT_PARAMS: SimParams = {
  replicas: 8,
  routers: 2,
  slots: 4,
  maxOngoingRequests: 16,
  inferMs: 10,
  loadMs: 50,
  models: 1000,
  busy: 0.7,
  durationMs: 60_000,
  warmupMs: 5_000,
  matchTimeoutMs: 1000,
  publishEveryMs: 250,
  viewDelayMs: 200,
  seed: 42,
  clientBackoffMs: 50,
};

/** Time after the last arrival for waiting requests to finish. */
const DRAIN_MS = 30_000;

function p99(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] ?? 0;
}

/** The arrival times and models of one run: the same sequence for every policy. */
function arrivals(pattern: PatternName, p: SimParams): { at: number; model: string }[] {
  const random = seededRandom(p.seed);
  const sample = modelSampler(pattern, p.models, random);
  const meanGap = p.inferMs / (p.busy * p.replicas);
  const out: { at: number; model: string }[] = [];
  for (let t = exponential(random, meanGap); t < p.durationMs; t += exponential(random, meanGap)) out.push({ at: t, model: `model-${sample()}` });
  return out;
}

/** The floor: one LRU over all slots of the pool, no concurrency, no routing mistakes. */
function ideal(pattern: PatternName, p: SimParams): SimResult {
  const seq = arrivals(pattern, p);
  const lru = new Map<string, true>();
  const slots = p.slots * p.replicas;
  let counted = 0;
  let loads = 0;
  const waits: number[] = [];
  for (const { at, model } of seq) {
    const hit = lru.delete(model);
    lru.set(model, true);
    if (lru.size > slots) lru.delete(lru.keys().next().value ?? '');
    if (at < p.warmupMs) continue;
    counted++;
    if (!hit) loads++;
    waits.push(hit ? 0 : p.loadMs);
  }
  return { policy: 'ideal', pattern, requests: counted, loadsPer1000: (1000 * loads) / counted, p99WaitMs: p99(waits), throughputPerS: (1000 * counted) / (p.durationMs - p.warmupMs), retries: 0 };
}

export function simulate(policy: PolicyName, pattern: PatternName, p: SimParams = DEFAULT_PARAMS): SimResult {
  if (policy === 'ideal') return ideal(pattern, p);
  const events = new EventQueue();
  const setTimer: SetTimer = (ms, fn) => events.schedule(ms, fn);
  const clock = { now: () => events.now() };
  const replicas = Array.from({ length: p.replicas }, (_, i) => new SimReplica(`replica-${i}`, p, events));
  const byName = new Map(replicas.map((r) => [r.name, r]));
  const names = replicas.map((r) => r.name);
  const routers: SimRouter[] = Array.from({ length: p.routers }, (_, i) => {
    const random: Random = seededRandom(p.seed * 1000 + i + 1);
    if (policy === 'ray-like') return new RayLikeRouter(names, p.maxOngoingRequests, p.matchTimeoutMs, events, random, setTimer);
    const b = new Balancer(
      { ...defaultPlacementPolicy(p.maxOngoingRequests), ...p.policy, matchTimeoutMs: p.matchTimeoutMs, recentMs: DEFAULT_RECENT_MS, tableLagMs: p.tableLagMs ?? 1000, maxQueue: 100_000 },
      clock,
      random,
      setTimer,
    );
    b.setReplicas(names);
    return b;
  });

  // Tables travel like the pod annotation: published every few hundred ms, seen late.
  const publish = (): void => {
    routers.forEach((router, i) => {
      for (const r of replicas) {
        const table = r.table();
        events.schedule((i + 1) * p.viewDelayMs, () => router.setTable(r.name, table));
      }
    });
    // Publishing stops a while after the last arrival so the event queue can run dry.
    if (events.now() < p.durationMs + DRAIN_MS) events.schedule(p.publishEveryMs, publish);
  };
  publish();

  const pick = seededRandom(p.seed + 7);
  let loadsAtWarmup = 0;
  let counted = 0;
  let completed = 0;
  let retries = 0;
  let lastDone = 0;
  const waits: number[] = [];
  events.schedule(p.warmupMs, () => {
    loadsAtWarmup = replicas.reduce((s, r) => s + r.loads, 0);
  });

  for (const { at, model } of arrivals(pattern, p)) {
    const router = routers[Math.min(routers.length - 1, Math.floor(pick() * routers.length))];
    if (router === undefined) continue;
    const counts = at >= p.warmupMs;
    if (counts) counted++;
    const send = (exclude: ReadonlySet<string>): void => {
      router.acquire(
        model,
        (res) => {
          if (!res.ok) return;
          const name = res.lease.replica;
          const replica = byName.get(name);
          if (!replica) return;
          const admitted = replica.admit({ model, arrivedAt: at }, (cache) => {
            router.release(res.lease);
            if (cache === 'hit' || cache === 'miss') router.observe(name, model);
            if (!counts) return;
            completed++;
            lastDone = events.now();
            waits.push(events.now() - at - p.inferMs);
          });
          if (!admitted) {
            // The replica's 503: one retry elsewhere at once, as the proxy does; when that is
            // refused too the client gets a 503 and comes back after a back-off.
            router.release(res.lease);
            retries++;
            if (exclude.size === 0) send(new Set([name]));
            else events.schedule(p.clientBackoffMs, () => send(new Set()));
          }
        },
        exclude,
      );
    };
    events.schedule(at - events.now(), () => send(new Set()));
    events.run(at);
  }
  events.run(p.durationMs + 2 * DRAIN_MS);
  const loads = replicas.reduce((s, r) => s + r.loads, 0) - loadsAtWarmup;
  return {
    policy,
    pattern,
    requests: counted,
    loadsPer1000: (1000 * loads) / Math.max(1, counted),
    p99WaitMs: p99(waits),
    throughputPerS: (1000 * completed) / Math.max(1, lastDone - p.warmupMs),
    retries,
  };
}
