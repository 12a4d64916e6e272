import type { CoordinationV1Api, V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../common/log.js';
import { apiErrorMessage, apiStatus } from '../common/kube-api-errors.js';
import { claimLease, leaseVerdict, observe, releasedLease, type ElectionTiming, type Observation } from './lease-record.js';

/** The Lease calls the election makes (client-node's CoordinationV1Api). */
export type LeaseApi = Pick<CoordinationV1Api, 'readNamespacedLease' | 'createNamespacedLease' | 'replaceNamespacedLease'>;

export interface ElectionClock {
  /** Local monotonic milliseconds: what lease expiry is measured in. */
  monotonicMs(): number;
  /** Wall-clock milliseconds: only written into the Lease, for people to read. */
  wallMs(): number;
}

export const systemElectionClock: ElectionClock = { monotonicMs: () => performance.now(), wallMs: () => Date.now() };

/** A leader that has not managed to renew for this share of the lease stops acting (client-go's renew deadline). */
const RENEW_DEADLINE_SHARE = 0.8;

/**
 * One active operator at a time, through a Lease, with client-go's semantics (lease-record.ts):
 * expiry is measured on this process's monotonic clock from the last change of the record it
 * saw, so clock skew between pods is harmless. Writes carry the resourceVersion read, so of two
 * candidates racing for a free lease one gets 409 and stays a candidate.
 */
export class LeaderElector {
  private observed: Observation | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly leases: LeaseApi,
    private readonly namespace: string,
    private readonly name: string,
    private readonly identity: string,
    private readonly timing: ElectionTiming,
    private readonly log: Logger,
    private readonly clock: ElectionClock = systemElectionClock,
  ) {}

  private async read(): Promise<V1Lease | undefined> {
    try {
      return await this.leases.readNamespacedLease({ name: this.name, namespace: this.namespace });
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /** One attempt to take or renew the lease; true when this process holds it afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const current = await this.read();
    const spec = current === undefined ? undefined : (current.spec ?? {});
    if (spec !== undefined) this.observed = observe(this.observed, spec, this.clock.monotonicMs());
    if (leaseVerdict(spec, this.identity, this.observed, this.timing, this.clock.monotonicMs()) === 'held') return false;
    const next = claimLease(spec, this.identity, this.timing, this.clock.wallMs());
    try {
      const written =
        current === undefined
          ? await this.leases.createNamespacedLease({
              namespace: this.namespace,
              body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.name, namespace: this.namespace }, spec: next },
            })
          : await this.leases.replaceNamespacedLease({ name: this.name, namespace: this.namespace, body: { ...current, spec: next } });
      this.observed = observe(this.observed, written.spec ?? next, this.clock.monotonicMs());
      return true;
    } catch (err) {
      // 409: someone else wrote the lease between our read and write; they won this round.
      if (apiStatus(err) === 409) return false;
      throw err;
    }
  }

  /** Resolves once this process leads; then keeps renewing, calling onLost if it cannot. */
  async acquire(onLost: (reason: string) => void): Promise<void> {
    for (;;) {
      if (this.stopped) throw new Error('leader election stopped');
      try {
        if (await this.tryAcquireOrRenew()) break;
      } catch (err) {
        this.log.warn('leader election attempt failed', { error: apiErrorMessage(err) });
      }
      await new Promise((r) => setTimeout(r, this.timing.retryPeriodMs));
    }
    this.log.info('became leader', { lease: `${this.namespace}/${this.name}`, identity: this.identity });
    let lastRenew = this.clock.monotonicMs();
    const renewDeadlineMs = this.timing.leaseDurationSeconds * 1000 * RENEW_DEADLINE_SHARE;
    const again = (): void => {
      this.timer = setTimeout(() => void renew(), this.timing.retryPeriodMs);
    };
    const renew = async (): Promise<void> => {
      if (this.stopped) return;
      // An attempt still hanging at the deadline counts as failed: a candidate may take the lease
      // soon after, and this process must have stopped acting by then.
      let deadline: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        this.tryAcquireOrRenew().then(
          (held) => (held ? 'renewed' : 'taken'),
          (err: unknown) => {
            this.log.warn('lease renewal failed', { error: apiErrorMessage(err) });
            return 'failed';
          },
        ),
        new Promise<'late'>((resolve) => (deadline = setTimeout(() => resolve('late'), Math.max(0, lastRenew + renewDeadlineMs - this.clock.monotonicMs())))),
      ]);
      clearTimeout(deadline);
      if (this.stopped) return;
      if (outcome === 'renewed') {
        lastRenew = this.clock.monotonicMs();
        again();
      } else if (outcome === 'failed' && this.clock.monotonicMs() - lastRenew < renewDeadlineMs) {
        // Transient API trouble: keep trying until the deadline.
        again();
      } else {
        onLost(outcome === 'taken' ? 'another instance holds the lease' : 'the lease could not be renewed in time');
      }
    };
    again();
  }

  /** Stops renewing and frees the lease so a successor need not wait for it to lapse. */
  async release(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    try {
      const current = await this.read();
      if (current?.spec === undefined || current.spec.holderIdentity !== this.identity) return;
      await this.leases.replaceNamespacedLease({ name: this.name, namespace: this.namespace, body: { ...current, spec: releasedLease(current.spec) } });
    } catch (err) {
      this.log.warn('could not release the lease', { error: apiErrorMessage(err) });
    }
  }
}
