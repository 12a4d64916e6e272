import type { Random } from '../../common/clock.js';
import { rendezvousRank } from './rendezvous.js';

/**
 * The placement decision for one request, as a pure function of what one router knows: no
 * sockets, no clock, randomness injected. The balancer (balancer.ts) keeps the state and the
 * wait queue around it; the simulator in bench/ runs the same function.
 */

/** Why a replica was chosen; also the label values of the placements metric. */
export type PlacementKind = 'holder' | 'new_copy' | 'cold' | 'fallback_after_timeout' | 'no_model';
export const PLACEMENT_KINDS: readonly PlacementKind[] = ['holder', 'new_copy', 'cold', 'fallback_after_timeout', 'no_model'];

/**
 * Where a replica that does not hold a model would get its bytes from, as its table says
 * (ADR 0047): host memory, its disk cache, or the store (also when its table does not say).
 */
export type MissTier = 'host' | 'disk' | 'store';
const TIER_RANK: Readonly<Record<MissTier, number>> = { host: 0, disk: 1, store: 2 };

/** One replica as the router sees it at decision time. */
export interface ReplicaLoad {
  /** Stable name (pod name, or URL in static mode): the rendezvous key, the same in every router. */
  name: string;
  /** Requests this router has in flight there. */
  inFlight: number;
  /** Requests for the model being placed this router has in flight there. */
  modelInFlight: number;
  /** Whether the replica holds (or is loading, or was just sent) the requested model. */
  holds: boolean;
  /**
   * Held only because this router just sent the model there: neither the table nor a response
   * has shown it yet. A copy in the making: no further copy is started until it is confirmed,
   * so a burst does not scatter copies that evict other models.
   */
  pending: boolean;
  /**
   * Model slots known to be free: the table's capacity minus the models it lists and those this
   * router sent there since. 0 when no table has said. A model placed there evicts nothing.
   */
  freeSlots: number;
  /** Model slots (the table's capacity); 0 when no table has said. */
  capacity: number;
  /**
   * The share of recent requests (as PlacementRequest.share) of the model a new one would
   * evict there, the least recently used of its last table; 0 when unknown.
   */
  victimShare: number;
  /**
   * This router's recent sends there, as a count that halves every half-life. Unlike
   * in-flight, it shows a replica that a hot model keeps busier than the rest on average,
   * where a new model's requests would queue.
   */
  traffic: number;
  /** Where a load of the requested model there would read it from; 'store' for a request without one. */
  tier: MissTier;
}

/** One request as placement sees it. */
export interface PlacementRequest {
  /** undefined: a request without a model id. */
  model: string | undefined;
  /**
   * The model's share of this router's recent requests, in [0, 1]. The same in every router
   * whatever the number of routers, and times the replica count it says how many replicas'
   * worth of traffic the model draws.
   */
  share: number;
  /** The request has waited its matching timeout for a full holder. */
  timedOut: boolean;
}

export interface PlacementPolicy {
  /** A replica with this many requests in flight is full (the spec's maxOngoingRequests). */
  maxOngoingRequests: number;
  /**
   * In-flight count at which a holder counts as hot: when every holder is at or past it, the
   * model gets one more copy on a replica that is itself below it. Below maxOngoingRequests, so
   * a hot model spreads before its holders saturate (Ray only spreads once all are full).
   */
  spreadAt: number;
  /**
   * Bounded-load factor c of consistent hashing with bounded loads: a replica takes a new model
   * only while its in-flight stays under max(loadFloor, ceil(c × mean in-flight)).
   */
  loadFactor: number;
  /** Requests of one model in flight per holder (this router's) at which it gets a new copy. */
  spreadPerCopy: number;
  /**
   * The floor of that bound: it keeps independent routers (which see different in-flight
   * counts) agreeing on a cold model's replica at low load.
   */
  loadFloor: number;
  /**
   * A model gets another copy only while each of its copies would carry more than this many
   * average replicas' worth of traffic (share × replicas / copies). Every copy takes a slot
   * and evicts the LRU model there, and a copy that gets too little traffic is itself soon
   * evicted and reloaded: copies of a model one holder can serve only add loads.
   */
  copyShare: number;
  /**
   * A new model goes only to a replica whose recent sends are not significantly above the
   * average: traffic ≤ mean + trafficSlack × √mean, a Poisson count's standard deviations.
   * Random variation rarely crosses it, so routers agree on where a cold model goes; a hot
   * model's holders that carry more than their part do, and new models go elsewhere. At low
   * traffic the √mean term dominates and the bound excludes nobody.
   */
  trafficSlack: number;
}

export type Decision = { kind: PlacementKind; replica: string } | { kind: 'wait' };

/**
 * Defaults chosen with the simulator (bench/SIMULATOR.md): spread at half of
 * maxOngoingRequests, or at three requests of the model per holder once the holders carry
 * three in flight, and then only while each copy would carry more than an average replica's
 * traffic; c = 1.25 as in consistent hashing with bounded loads; two standard deviations of
 * slack on recent sends.
 */
export function defaultPlacementPolicy(maxOngoingRequests: number): PlacementPolicy {
  const spreadAt = Math.max(1, Math.ceil(maxOngoingRequests / 2));
  return { maxOngoingRequests, spreadAt, loadFactor: 1.25, loadFloor: Math.min(3, spreadAt), spreadPerCopy: 3, copyShare: 1, trafficSlack: 2 };
}

/** Least in-flight of two distinct random picks (power of two choices); one pick when alone. */
export function leastOfTwo(replicas: readonly ReplicaLoad[], random: Random): ReplicaLoad | undefined {
  const n = replicas.length;
  if (n === 0) return undefined;
  const i = Math.min(n - 1, Math.floor(random() * n));
  const a = replicas[i];
  if (n === 1) return a;
  // The second draw skips the first index so the two choices are always distinct.
  let j = Math.min(n - 2, Math.floor(random() * (n - 1)));
  if (j >= i) j++;
  const b = replicas[j];
  if (a === undefined || b === undefined) return a ?? b;
  return b.inFlight < a.inFlight ? b : a;
}

/**
 * The first replica within the load bounds, in three groups, each in rendezvous order for
 * `model` so that routers agree: those with a free model slot; then those whose next victim
 * draws less than an average slot's traffic; then the rest. When none is within the bounds,
 * the least loaded (earliest in that order on ties) if `anyLoad`, else undefined. A model
 * placed on a full replica evicts one; evicting a model that is still asked for means loading
 * it again soon (Ray's "fewest models" rule balances slot use; this also spares hot models).
 * Within the first two groups together, a replica whose table has the model's bytes warmer
 * (host memory, then disk) comes first: its load skips the store, and maybe the disk (ADR
 * 0047). Not over the third: sparing a hot model is worth more than a faster load.
 */
export function rendezvousPick(model: string, candidates: readonly ReplicaLoad[], all: readonly ReplicaLoad[], policy: PlacementPolicy, below: number, anyLoad: boolean): ReplicaLoad | undefined {
  const total = all.reduce((s, r) => s + r.inFlight, 0);
  const bound = Math.max(policy.loadFloor, Math.ceil((policy.loadFactor * (total + 1)) / Math.max(1, all.length)));
  const meanTraffic = all.reduce((s, r) => s + r.traffic, 0) / Math.max(1, all.length);
  const trafficBound = meanTraffic + policy.trafficSlack * Math.sqrt(meanTraffic);
  const slotShare =
    1 /
    Math.max(
      1,
      all.reduce((s, r) => s + r.capacity, 0),
    );
  const group = (r: ReplicaLoad): number => (r.freeSlots > 0 ? 0 : r.victimShare < slotShare ? 1 : 2);
  // Hot victims last, then the warmest tier, then free slots before cold victims: one sort key.
  const key = (r: ReplicaLoad): number => {
    const g = group(r);
    return (g === 2 ? 6 : 0) + TIER_RANK[r.tier] * 2 + Math.min(g, 1);
  };
  const ordered = rendezvousRank(candidates, model)
    .map((r) => ({ r, k: key(r) }))
    .sort((a, b) => a.k - b.k)
    .map((x) => x.r);
  // A free slot wins over traffic: a model placed there evicts nothing, so it costs no load
  // later, while the traffic bound only spreads the loads that full replicas must take.
  const inBound = ordered.find((r) => r.inFlight < Math.min(bound, below) && (r.freeSlots > 0 || r.traffic <= trafficBound));
  if (inBound !== undefined || !anyLoad) return inBound;
  let best: ReplicaLoad | undefined;
  for (const r of ordered) if (r.inFlight < below && (best === undefined || r.inFlight < best.inFlight)) best = r;
  return best;
}

/**
 * Whether a model's holders are hot enough to give it another copy. The model must draw more
 * traffic than its copies can carry at copyShare each; and either every open holder is at
 * spreadAt (close to full, whatever it is busy with), or the model itself keeps spreadPerCopy
 * requests in flight per holder while they are past loadFloor. The in-flight tests see a
 * burst now; the share says whether the burst is the model's lasting traffic, so a model that
 * one holder serves is not copied on every burst, evicting others and itself soon evicted.
 */
export function isHot(share: number, replicaCount: number, holders: readonly ReplicaLoad[], openHolders: readonly ReplicaLoad[], policy: PlacementPolicy): boolean {
  if ((share * replicaCount) / holders.length <= policy.copyShare) return false;
  const coolest = leastInFlight(openHolders);
  if (coolest >= policy.spreadAt) return true;
  let modelInFlight = 0;
  for (const r of holders) modelInFlight += r.modelInFlight;
  return modelInFlight / holders.length >= policy.spreadPerCopy && coolest >= policy.loadFloor;
}

/** The smallest in-flight count of `replicas`; Infinity for none. */
function leastInFlight(replicas: readonly ReplicaLoad[]): number {
  let least = Number.POSITIVE_INFINITY;
  for (const r of replicas) least = Math.min(least, r.inFlight);
  return least;
}

const WAIT: Decision = { kind: 'wait' };

/** The replicas below `below` in flight, leaving out those that hold the model when `withHolders` is false. */
function openOf(replicas: readonly ReplicaLoad[], below: number, withHolders: boolean): ReplicaLoad[] {
  const out: ReplicaLoad[] = [];
  for (const r of replicas) if (r.inFlight < below && (withHolders || !r.holds)) out.push(r);
  return out;
}

/**
 * Chooses a replica for `request`, or says it waits. Runs for every request: loops instead of
 * filters and callbacks, and the lists only the chosen branch reads.
 */
export function decide(request: PlacementRequest, replicas: readonly ReplicaLoad[], policy: PlacementPolicy, random: Random): Decision {
  const { model, share, timedOut } = request;
  const max = policy.maxOngoingRequests;
  if (model === undefined) {
    const r = leastOfTwo(openOf(replicas, max, true), random);
    return r ? { kind: 'no_model', replica: r.name } : WAIT;
  }
  const holders: ReplicaLoad[] = [];
  const openHolders: ReplicaLoad[] = [];
  let copyPending = false;
  for (const r of replicas) {
    if (!r.holds) continue;
    holders.push(r);
    if (r.inFlight < max) openHolders.push(r);
    if (r.pending) copyPending = true;
  }
  if (holders.length === 0) {
    const r = rendezvousPick(model, openOf(replicas, max, true), replicas, policy, max, true);
    return r ? { kind: 'cold', replica: r.name } : WAIT;
  }
  if (!copyPending && isHot(share, replicas.length, holders, openHolders, policy)) {
    // A new copy goes only to a replica cooler than every holder, in the order every router
    // agrees on, so the copy relieves the holders instead of queueing behind their work.
    const coolest = Math.min(leastInFlight(openHolders), policy.spreadAt);
    const r = rendezvousPick(model, openOf(replicas, max, false), replicas, policy, coolest, false);
    if (r) return { kind: 'new_copy', replica: r.name };
  }
  const h = leastOfTwo(openHolders, random);
  if (h) return { kind: 'holder', replica: h.name };
  if (!timedOut) return WAIT;
  const r = rendezvousPick(model, openOf(replicas, max, false), replicas, policy, max, true);
  return r ? { kind: 'fallback_after_timeout', replica: r.name } : WAIT;
}
