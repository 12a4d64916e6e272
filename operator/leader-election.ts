import type { Logger } from '../common/log.js';
import { isStatus, resourcePath, type KubeClient } from './kube-client.js';

/** The parts of a coordination.k8s.io/v1 Lease the election reads and writes. */
export interface Lease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

export interface ElectionTiming {
  /** How long a lease holds without renewal. */
  leaseDurationSeconds: number;
  /** How often the leader renews and a candidate retries. */
  retryPeriodMs: number;
}

export type LeaseVerdict = 'mine' | 'free' | 'held';

/** Who may hold the lease at `nowMs`: an empty holder or a lapsed renewal frees it. */
export function leaseVerdict(lease: Lease | undefined, identity: string, nowMs: number): LeaseVerdict {
  if (lease === undefined) return 'free';
  const holder = lease.spec.holderIdentity ?? '';
  if (holder === identity) return 'mine';
  if (holder === '') return 'free';
  const renewed = Date.parse(lease.spec.renewTime ?? lease.spec.acquireTime ?? '');
  const duration = (lease.spec.leaseDurationSeconds ?? 0) * 1000;
  return Number.isNaN(renewed) || renewed + duration < nowMs ? 'free' : 'held';
}

/** The lease after `identity` takes or renews it. */
export function claimLease(lease: Lease, identity: string, timing: ElectionTiming, nowMs: number): Lease {
  const now = new Date(nowMs).toISOString().replace('Z', '000Z');
  const taking = lease.spec.holderIdentity !== identity;
  return {
    ...lease,
    spec: {
      ...lease.spec,
      holderIdentity: identity,
      leaseDurationSeconds: timing.leaseDurationSeconds,
      renewTime: now,
      ...(taking ? { acquireTime: now, leaseTransitions: (lease.spec.leaseTransitions ?? 0) + (lease.spec.holderIdentity ? 1 : 0) } : {}),
    },
  };
}

/**
 * One active operator at a time, through a Lease, as client-go's leaderelection does.
 * Losing the lease is fatal to the caller (onLost): a former leader must stop writing at once,
 * and a restart is the simplest way to be sure it does.
 */
export class LeaderElector {
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: KubeClient,
    private readonly namespace: string,
    private readonly name: string,
    private readonly identity: string,
    private readonly timing: ElectionTiming,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  private get path(): string {
    return resourcePath('coordination.k8s.io/v1', 'leases', this.namespace, this.name);
  }

  /** One attempt to take or renew the lease; true when this process holds it afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const current = await this.client.find<Lease>(this.path);
    const verdict = leaseVerdict(current, this.identity, this.now());
    if (verdict === 'held') return false;
    const base: Lease = current ?? { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.name, namespace: this.namespace }, spec: {} };
    const next = claimLease(base, this.identity, this.timing, this.now());
    try {
      if (current === undefined) await this.client.create(resourcePath('coordination.k8s.io/v1', 'leases', this.namespace), next);
      else await this.client.replace(this.path, next);
      return true;
    } catch (err) {
      // 409: someone else wrote the lease between our read and write; they won this round.
      if (isStatus(err, 409)) return false;
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
        this.log.warn('leader election attempt failed', { error: String(err) });
      }
      await new Promise((r) => setTimeout(r, this.timing.retryPeriodMs));
    }
    this.log.info('became leader', { lease: `${this.namespace}/${this.name}`, identity: this.identity });
    let lastRenew = this.now();
    const renew = async (): Promise<void> => {
      if (this.stopped) return;
      let held = false;
      try {
        held = await this.tryAcquireOrRenew();
      } catch (err) {
        this.log.warn('lease renewal failed', { error: String(err) });
        // Transient API trouble: keep trying until the lease would have lapsed.
        held = this.now() - lastRenew < this.timing.leaseDurationSeconds * 1000 * 0.8;
        if (held) {
          this.timer = setTimeout(() => void renew(), this.timing.retryPeriodMs);
          return;
        }
      }
      if (!held) {
        onLost('the lease is held by another instance or could not be renewed');
        return;
      }
      lastRenew = this.now();
      this.timer = setTimeout(() => void renew(), this.timing.retryPeriodMs);
    };
    this.timer = setTimeout(() => void renew(), this.timing.retryPeriodMs);
  }

  /** Stops renewing and frees the lease so a successor need not wait for it to lapse. */
  async release(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    try {
      const current = await this.client.find<Lease>(this.path);
      if (current === undefined || current.spec.holderIdentity !== this.identity) return;
      await this.client.replace(this.path, { ...current, spec: { ...current.spec, holderIdentity: '', leaseDurationSeconds: 1 } });
    } catch (err) {
      this.log.warn('could not release the lease', { error: String(err) });
    }
  }
}
