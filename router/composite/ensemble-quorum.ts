import { ERROR_CATALOGUE, ModelmuxError, type ErrorCode } from '../../common/errors.js';
import type { EnsembleCombiner } from '../../common/model-route.js';

/** How one member's request ended. */
export type MemberSettlement = { ok: true } | { ok: false; code: ErrorCode; message: string };

/** What the ensemble does now: wait for more members, answer with `members` (indexes, in member order), or fail. */
export type QuorumDecision = { kind: 'wait' } | { kind: 'answer'; members: number[] } | { kind: 'fail'; error: ModelmuxError };

/**
 * When an ensemble answers, pure. The quorum is the number of members that must succeed (all
 * of them by default; 1 for `first`).
 * - `first` answers as soon as `quorum` members have succeeded, with the earliest of them: the
 *   others are then cancelled.
 * - mean, median and vote wait for every member, and combine those that succeeded once all
 *   have ended, or at the deadline (the route's `deadlineMs`, bounded by the request's own)
 *   when at least `quorum` have; members still running then are cancelled.
 * - As soon as the quorum can no longer be met the ensemble fails: 502 `ensemble_quorum`
 *   listing every member's error, or, when every member that failed refused the request with the
 *   same 400 error (`input_mismatch`, `invalid_request`: the request is wrong, not the route),
 *   that error. At the deadline with
 *   too few answers: 504 `ensemble_deadline`.
 */
export class EnsembleTally {
  private readonly settled: (MemberSettlement | undefined)[];
  /** Members that succeeded, in the order they did. */
  private readonly arrivals: number[] = [];
  private failures = 0;
  readonly quorum: number;

  constructor(
    private readonly members: readonly string[],
    private readonly combine: EnsembleCombiner,
    quorum: number | undefined,
  ) {
    this.settled = members.map(() => undefined);
    this.quorum = Math.min(members.length, quorum ?? (combine === 'first' ? 1 : members.length));
  }

  get pending(): number[] {
    return this.settled.flatMap((s, i) => (s === undefined ? [i] : []));
  }

  /** Member `index` ended; later settlements of the same member are ignored. */
  settle(index: number, s: MemberSettlement): QuorumDecision {
    if (this.settled[index] !== undefined) return { kind: 'wait' };
    this.settled[index] = s;
    if (s.ok) this.arrivals.push(index);
    else this.failures++;
    const ok = this.arrivals.length;
    if (this.combine === 'first' && ok >= this.quorum) return { kind: 'answer', members: [this.arrivals[0] as number] };
    if (ok + (this.members.length - ok - this.failures) < this.quorum) return { kind: 'fail', error: this.quorumError() };
    if (ok + this.failures === this.members.length) return { kind: 'answer', members: this.inOrder() };
    return { kind: 'wait' };
  }

  /** The deadline passed: answer with those that succeeded if they are enough. `why` says which deadline. */
  expire(why: string): QuorumDecision {
    const ok = this.arrivals.length;
    if (ok >= this.quorum) return { kind: 'answer', members: this.combine === 'first' ? [this.arrivals[0] as number] : this.inOrder() };
    const late = this.pending.map((i) => this.members[i]).join(', ');
    return {
      kind: 'fail',
      error: new ModelmuxError('ensemble_deadline', `${why}: ${ok} of ${this.members.length} members answered, the quorum is ${this.quorum}; no answer from ${late}${this.failureList()}`),
    };
  }

  private inOrder(): number[] {
    return [...this.arrivals].sort((a, b) => a - b);
  }

  private failureList(): string {
    const failed = this.settled.flatMap((s, i) => (s !== undefined && !s.ok ? [`${this.members[i]} (${s.code}: ${s.message})`] : []));
    return failed.length === 0 ? '' : `; failed: ${failed.join('; ')}`;
  }

  private quorumError(): ModelmuxError {
    const codes = new Set(this.settled.flatMap((s) => (s !== undefined && !s.ok ? [s.code] : [])));
    const only = codes.size === 1 ? ([...codes][0] as ErrorCode) : undefined;
    const detail = `${this.failures} of ${this.members.length} members failed, the quorum is ${this.quorum}${this.failureList()}`;
    if (only !== undefined && ERROR_CATALOGUE[only].status === 400) return new ModelmuxError(only, `every failed member refused the request: ${detail}`);
    return new ModelmuxError('ensemble_quorum', detail);
  }
}
