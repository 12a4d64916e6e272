import { BoundCounter, BoundHistogram } from '../../common/bound-metrics.js';
import { oncePer } from '../../common/once-per.js';
import type { RouterMetrics } from '../metrics.js';

/**
 * How a member of an ensemble (or a step of a sequence) ended: the values of the member
 * metric's `outcome` label. ok: it answered and the answer was used; failed: it answered an
 * error or none; cancelled: the ensemble no longer needed it (`first` had its answer, the quorum
 * was out of reach, the client went away); deadline: it was still running at the deadline.
 */
export type MemberOutcome = 'ok' | 'failed' | 'cancelled' | 'deadline';

/**
 * The metrics of ensembles and sequences, on the router's registry. Labels are bounded by the
 * ModelRoute objects, not by requests: `composite` is a route's public name and `member` a
 * model its spec names (at most 16 per route).
 */
export class CompositeMetrics {
  readonly members: BoundCounter;
  readonly memberDuration: BoundHistogram;

  private constructor(metrics: RouterMetrics) {
    this.members = new BoundCounter(
      'modelmux_router_composite_member_requests_total',
      'Member requests of ensembles and steps of sequences, by how they ended.',
      ['route', 'composite', 'member', 'outcome'],
      metrics.registry,
    );
    this.memberDuration = new BoundHistogram(
      'modelmux_router_composite_member_duration_seconds',
      'Time from sending a member request (or a step) to its answer, those that answered.',
      ['route', 'composite', 'member'],
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      metrics.registry,
    );
  }

  /** The one instance registered on `metrics`' registry. */
  static readonly for = oncePer((metrics: RouterMetrics) => new CompositeMetrics(metrics));

  member(route: string, composite: string, member: string, outcome: MemberOutcome, seconds: number | undefined): void {
    this.members.labels({ route, composite, member, outcome }).inc();
    if (seconds !== undefined) this.memberDuration.labels({ route, composite, member }).observe(seconds);
  }
}
