import { claimLease, leaseVerdict, type Lease } from '../../../operator/leader-election.js';

const lease = (spec: Lease['spec']): Lease => ({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'l', namespace: 'ns' }, spec });
const at = (iso: string): number => Date.parse(iso);
const timing = { leaseDurationSeconds: 15, retryPeriodMs: 3000 };

describe('leaseVerdict', () => {
  it('is free when there is no lease or no holder', () => {
    expect(leaseVerdict(undefined, 'me', 0)).toBe('free');
    expect(leaseVerdict(lease({ holderIdentity: '' }), 'me', 0)).toBe('free');
  });
  it('is mine when I hold it', () => {
    expect(leaseVerdict(lease({ holderIdentity: 'me', renewTime: '2026-01-01T00:00:00.000000Z', leaseDurationSeconds: 15 }), 'me', at('2026-01-02T00:00:00Z'))).toBe('mine');
  });
  it('is held while another holder renewed within the lease duration, and free after', () => {
    const l = lease({ holderIdentity: 'other', renewTime: '2026-01-01T00:00:00.000000Z', leaseDurationSeconds: 15 });
    expect(leaseVerdict(l, 'me', at('2026-01-01T00:00:14Z'))).toBe('held');
    expect(leaseVerdict(l, 'me', at('2026-01-01T00:00:16Z'))).toBe('free');
  });
});

describe('claimLease', () => {
  it('takes a lease from a former holder, counting the transition, with a MicroTime', () => {
    const next = claimLease(lease({ holderIdentity: 'other', leaseTransitions: 2 }), 'me', timing, at('2026-01-01T00:00:00Z'));
    expect(next.spec).toEqual({
      holderIdentity: 'me',
      leaseDurationSeconds: 15,
      renewTime: '2026-01-01T00:00:00.000000Z',
      acquireTime: '2026-01-01T00:00:00.000000Z',
      leaseTransitions: 3,
    });
  });
  it('renews without touching acquireTime or transitions', () => {
    const held = lease({ holderIdentity: 'me', acquireTime: 'A', leaseTransitions: 1 });
    const next = claimLease(held, 'me', timing, at('2026-01-01T00:00:05Z'));
    expect(next.spec.acquireTime).toBe('A');
    expect(next.spec.leaseTransitions).toBe(1);
    expect(next.spec.renewTime).toBe('2026-01-01T00:00:05.000000Z');
  });
});
