import type { Random } from '../common/clock.js';
import { rendezvousRank } from './rendezvous.js';

/**
 * The placement decision for one request, as a pure function of what one router knows: no
 * sockets, no clock, randomness injected. The balancer (balancer.ts) keeps the state and the
 * wait queue around it; the simulator in bench/ runs the same function.
 */

/** Why a replica was chosen; also the label values of the placements metric. */
export type PlacementKind = 'holder' | 'new_copy' | 'cold' | 'fallback_after_timeout' | 'no_model';
export const PLACEMENT_KINDS: readonly PlacementKind[] = ['holder', 'new_copy', 'cold', 'fallback_after_timeout', 'no_model'];

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
}

export type Decision = { kind: PlacementKind; replica: string } | { kind: 'wait' };

/**
 * Defaults chosen with the simulator (bench/SIMULATOR.md): spread at half of
 * maxOngoingRequests whatever the traffic, or at three requests of the model per holder once
 * the holders carry three in flight; c = 1.25 as in consistent hashing with bounded loads.
 */
export function defaultPlacementPolicy(maxOngoingRequests: number): PlacementPolicy {
  const spreadAt = Math.max(1, Math.ceil(maxOngoingRequests / 2));
  return { maxOngoingRequests, spreadAt, loadFactor: 1.25, loadFloor: Math.min(3, spreadAt), spreadPerCopy: 3 };
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
 * The first replica in rendezvous order for `model` that is within the load bound; when none
 * is, the least loaded (earliest in that order on ties) if `anyLoad`, else undefined.
 */
export function rendezvousPick(
  model: string,
  candidates: readonly ReplicaLoad[],
  all: readonly ReplicaLoad[],
  policy: PlacementPolicy,
  below: number,
  anyLoad: boolean,
): ReplicaLoad | undefined {
  const total = all.reduce((s, r) => s + r.inFlight, 0);
  const bound = Math.max(policy.loadFloor, Math.ceil((policy.loadFactor * (total + 1)) / Math.max(1, all.length)));
  const ranked = rendezvousRank(candidates, model);
  const inBound = ranked.find((r) => r.inFlight < Math.min(bound, below));
  if (inBound !== undefined || !anyLoad) return inBound;
  let best: ReplicaLoad | undefined;
  for (const r of ranked) if (r.inFlight < below && (best === undefined || r.inFlight < best.inFlight)) best = r;
  return best;
}

/**
 * Whether a model's holders are hot enough to give it another copy: either every open holder
 * is at spreadAt (close to full, whatever it is busy with), or the model itself keeps
 * spreadPerCopy requests in flight per holder while they are past loadFloor. The second test
 * looks at the model's own traffic, so a holder that is busy with many lukewarm models (Zipf)
 * does not copy each of them and evict the rest, while a model drawing most of the traffic
 * spreads early.
 */
export function isHot(holders: readonly ReplicaLoad[], openHolders: readonly ReplicaLoad[], policy: PlacementPolicy): boolean {
  if (openHolders.every((r) => r.inFlight >= policy.spreadAt)) return true;
  const perCopy = holders.reduce((s, r) => s + r.modelInFlight, 0) / holders.length;
  return perCopy >= policy.spreadPerCopy && openHolders.every((r) => r.inFlight >= policy.loadFloor);
}

/**
 * Chooses a replica for a request for `model` (undefined: a request without a model id).
 * `timedOut` is true once the request has waited its matching timeout for a full holder.
 */
export function decide(
  model: string | undefined,
  replicas: readonly ReplicaLoad[],
  policy: PlacementPolicy,
  random: Random,
  timedOut: boolean,
): Decision {
  const max = policy.maxOngoingRequests;
  const open = replicas.filter((r) => r.inFlight < max);
  if (model === undefined) {
    const r = leastOfTwo(open, random);
    return r ? { kind: 'no_model', replica: r.name } : { kind: 'wait' };
  }
  const holders = replicas.filter((r) => r.holds);
  if (holders.length === 0) {
    const r = rendezvousPick(model, open, replicas, policy, max, true);
    return r ? { kind: 'cold', replica: r.name } : { kind: 'wait' };
  }
  const openHolders = holders.filter((r) => r.inFlight < max);
  const others = open.filter((r) => !r.holds);
  if (!holders.some((r) => r.pending) && isHot(holders, openHolders, policy)) {
    // A new copy goes only to a replica cooler than every holder, in the order every router
    // agrees on, so the copy relieves the holders instead of queueing behind their work.
    const coolest = openHolders.reduce((m, r) => Math.min(m, r.inFlight), policy.spreadAt);
    const r = rendezvousPick(model, others, replicas, policy, coolest, false);
    if (r) return { kind: 'new_copy', replica: r.name };
  }
  const h = leastOfTwo(openHolders, random);
  if (h) return { kind: 'holder', replica: h.name };
  if (!timedOut) return { kind: 'wait' };
  const r = rendezvousPick(model, others, replicas, policy, max, true);
  return r ? { kind: 'fallback_after_timeout', replica: r.name } : { kind: 'wait' };
}
