import { Balancer, type AcquireResult, type BalancerOptions } from '../../../router/placement/balancer.js';
import { defaultPlacementPolicy } from '../../../router/placement/placement.js';
import { draws, FakeTime } from './fake-time.js';

// One request per replica fills it, so a second request has to wait for a slot.
const options: BalancerOptions = { ...defaultPlacementPolicy(1), matchTimeoutMs: 1000, recentMs: 5000, tableLagMs: 1000, maxQueue: 8, zeroHoldMs: 30_000, zeroHoldMax: 2 };

function setup(opts: Partial<BalancerOptions> = {}): { b: Balancer; time: FakeTime } {
  const time = new FakeTime();
  return { b: new Balancer({ ...options, ...opts }, time, draws(0.5, 0.5, 0.5, 0.5, 0.5, 0.5), time.setTimer), time };
}

function take(b: Balancer, model: string | undefined, exclude?: Set<string>): { result: () => AcquireResult | undefined; cancel: () => void } {
  let result: AcquireResult | undefined;
  const cancel = b.acquire(model, (r) => (result = r), exclude);
  return { result: () => result, cancel };
}

const codeOf = (r: AcquireResult | undefined): string | undefined => (r === undefined || r.ok ? undefined : r.error.code);

describe('Balancer at zero replicas (scale from zero)', () => {
  it('holds a request until a replica comes, then places it there with the time it waited', () => {
    const { b, time } = setup();
    const t = take(b, 'm1');
    expect(t.result()).toBeUndefined();
    expect(b.heldCount).toBe(1);
    time.advance(12_000);
    b.setReplicas(['a']);
    expect(t.result()).toEqual({ ok: true, lease: { replica: 'a', model: 'm1', kind: 'cold', waitedMs: 12_000, warm: false } });
    expect(b.heldCount).toBe(0);
  });

  it('answers no_replicas once zeroHoldMs has passed without a replica', () => {
    const { b, time } = setup();
    const t = take(b, undefined);
    time.advance(29_999);
    expect(t.result()).toBeUndefined();
    time.advance(1);
    expect(codeOf(t.result())).toBe('no_replicas');
    expect(b.heldCount).toBe(0);
  });

  it('holds at most zeroHoldMax requests; the next is refused at once', () => {
    const { b } = setup();
    const held = [take(b, 'm1'), take(b, 'm2')];
    const third = take(b, 'm3');
    expect(codeOf(third.result())).toBe('no_replicas');
    expect(held.map((h) => h.result())).toEqual([undefined, undefined]);
    expect(b.heldCount).toBe(2);
  });

  it('refuses at once when holding is off (zeroHoldMs 0)', () => {
    const { b } = setup({ zeroHoldMs: 0 });
    expect(codeOf(take(b, 'm1').result())).toBe('no_replicas');
    expect(b.heldCount).toBe(0);
  });

  it('does not hold a retry, whose replicas are all excluded', () => {
    const { b } = setup();
    expect(codeOf(take(b, 'm1', new Set(['a'])).result())).toBe('no_replicas');
  });

  it('lets a cancelled request (client gone) leave the hold', () => {
    const { b, time } = setup();
    const t = take(b, 'm1');
    t.cancel();
    expect(b.heldCount).toBe(0);
    time.advance(30_000);
    expect(t.result()).toBeUndefined();
  });

  it('keeps holding through an empty update, and a request that then finds the new replica full waits for its slot', () => {
    const { b, time } = setup();
    const first = take(b, 'm1');
    const second = take(b, 'm1');
    b.setReplicas([]);
    expect(b.heldCount).toBe(2);
    b.setReplicas(['a']);
    // maxOngoingRequests 1: one goes, the other waits for the slot like any queued request.
    expect(first.result()).toMatchObject({ ok: true, lease: { replica: 'a' } });
    expect(second.result()).toBeUndefined();
    expect(b.heldCount).toBe(0);
    expect(b.queueDepth).toBe(1);
    time.advance(30_000);
    expect(second.result()).toBeUndefined();
    const lease = first.result();
    if (!lease?.ok) throw new Error('not placed');
    b.release(lease.lease);
    expect(second.result()).toMatchObject({ ok: true, lease: { replica: 'a' } });
  });
});
