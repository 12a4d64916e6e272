import { REPLICA_ENV } from '../../../common/replica-env.js';
import { parseReplicaConfig } from '../../../replica/config.js';
import { PublishCoalescer } from '../../../replica/publication/publish-coalescer.js';

/** Steps a fake clock and its timers. */
function fakeTime() {
  let now = 0;
  let timers: { at: number; fn: () => void }[] = [];
  return {
    clock: { now: () => now },
    schedule: (fn: () => void, ms: number) => {
      const t = { at: now + ms, fn };
      timers.push(t);
      return () => {
        timers = timers.filter((x) => x !== t);
      };
    },
    async advance(ms: number) {
      const end = now + ms;
      for (;;) {
        const next = timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
        if (!next) break;
        now = next.at;
        timers = timers.filter((t) => t !== next);
        next.fn();
        await new Promise<void>((r) => setImmediate(r));
      }
      now = end;
      await new Promise<void>((r) => setImmediate(r));
    },
  };
}

describe('publish coalescer', () => {
  it('sends a burst of changes as two publications at most per interval, the latest state last', async () => {
    const time = fakeTime();
    let state = 0;
    const sent: number[] = [];
    const c = new PublishCoalescer({
      minIntervalMs: 300,
      maxBackoffMs: 10_000,
      clock: time.clock,
      schedule: time.schedule,
      publish: () => {
        sent.push(state);
        return Promise.resolve();
      },
    });
    for (let i = 1; i <= 1000; i++) {
      state = i;
      c.notify();
      if (i % 100 === 0) await time.advance(1); // 1000 changes over 10 ms
    }
    await time.advance(1000);
    expect(sent).toEqual([1, 1000]);
  });

  it('never publishes more often than the interval under steady churn', async () => {
    const time = fakeTime();
    const at: number[] = [];
    const c = new PublishCoalescer({
      minIntervalMs: 250,
      maxBackoffMs: 10_000,
      clock: time.clock,
      schedule: time.schedule,
      publish: () => {
        at.push(time.clock.now());
        return Promise.resolve();
      },
    });
    for (let i = 0; i < 200; i++) {
      c.notify();
      await time.advance(10); // a change every 10 ms for 2 s
    }
    await time.advance(500);
    expect(at.length).toBeLessThanOrEqual(2000 / 250 + 2);
    for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(250);
  });

  it('writes about one patch a second by default however fast the models churn, the last state within a second of the last change', async () => {
    const time = fakeTime();
    const interval = parseReplicaConfig([], { [REPLICA_ENV.modelSource]: 'file:///m' }).publishIntervalMs;
    expect(interval).toBe(1000);
    let state = 0;
    const sent: { at: number; state: number }[] = [];
    const c = new PublishCoalescer({
      minIntervalMs: interval,
      maxBackoffMs: 30_000,
      clock: time.clock,
      schedule: time.schedule,
      publish: () => {
        sent.push({ at: time.clock.now(), state });
        return Promise.resolve();
      },
    });
    // 50 table changes a second for 30 s: 1,500 changes.
    for (let i = 1; i <= 1500; i++) {
      state = i;
      c.notify();
      await time.advance(20);
    }
    const lastChange = time.clock.now();
    await time.advance(2000);
    expect(sent.length).toBeLessThanOrEqual(31);
    expect(sent.length).toBeGreaterThanOrEqual(29);
    expect(sent.at(-1)?.state).toBe(1500);
    expect((sent.at(-1)?.at ?? Infinity) - lastChange).toBeLessThanOrEqual(interval);
  });

  it('keeps one publication in flight and retries a failure with backoff', async () => {
    const time = fakeTime();
    let calls = 0;
    let failNext = true;
    const c = new PublishCoalescer({
      minIntervalMs: 100,
      maxBackoffMs: 1000,
      clock: time.clock,
      schedule: time.schedule,
      publish: () => {
        calls++;
        if (!failNext) return Promise.resolve();
        failNext = false;
        return Promise.reject(new Error('api server down'));
      },
    });
    c.notify();
    await time.advance(0);
    expect(calls).toBe(1);
    await time.advance(150);
    expect(calls).toBe(1); // backoff doubled the gap after the failure
    await time.advance(100);
    expect(calls).toBe(2);
    await time.advance(1000);
    expect(calls).toBe(2); // nothing changed since the successful retry
  });

  it('flushes a pending change at once on shutdown', async () => {
    const time = fakeTime();
    let calls = 0;
    const c = new PublishCoalescer({
      minIntervalMs: 10_000,
      maxBackoffMs: 10_000,
      clock: time.clock,
      schedule: time.schedule,
      publish: () => {
        calls++;
        return Promise.resolve();
      },
    });
    c.notify();
    await time.advance(0);
    c.notify();
    await c.flush();
    expect(calls).toBe(2);
  });
});
