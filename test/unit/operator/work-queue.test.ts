import { backoffDelayMs } from '../../../common/backoff.js';
import { WorkQueue, type Timers } from '../../../operator/work-queue.js';

/** Timers driven by hand: advance(ms) fires what is due, in order. */
class ManualTimers implements Timers {
  now = 0;
  private seq = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  advance(ms: number): void {
    this.now += ms;
    for (const [id, t] of [...this.pending].sort((a, b) => a[1].at - b[1].at)) {
      if (t.at <= this.now) {
        this.pending.delete(id);
        t.fn();
      }
    }
  }
  get scheduled(): number {
    return this.pending.size;
  }
}

function setup(): { q: WorkQueue<string>; timers: ManualTimers } {
  const timers = new ManualTimers();
  return { q: new WorkQueue<string>(timers, { baseMs: 100, maxMs: 1000 }, () => timers.now), timers };
}

describe('backoffDelayMs', () => {
  it('doubles from the base per failure and stops at the ceiling', () => {
    const p = { baseMs: 100, maxMs: 1000 };
    expect([1, 2, 3, 4, 5, 6, 100].map((n) => backoffDelayMs(n, p))).toEqual([100, 200, 400, 800, 1000, 1000, 1000]);
    expect(backoffDelayMs(0, p)).toBe(0);
  });
});

describe('WorkQueue', () => {
  it('holds a key once however often it is added', async () => {
    const { q } = setup();
    q.add('ns/a');
    q.add('ns/a');
    q.add('ns/b');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('ns/a');
    expect(await q.get()).toBe('ns/b');
    expect(q.length).toBe(0);
  });

  it('never hands one key to two workers: a key added while in progress comes back after done', async () => {
    const { q } = setup();
    q.add('ns/a');
    const key = await q.get();
    q.add('ns/a');
    expect(q.length).toBe(0);
    let second: string | undefined;
    void q.get().then((k) => (second = k));
    await Promise.resolve();
    expect(second).toBeUndefined();
    q.done(key!);
    await Promise.resolve();
    expect(second).toBe('ns/a');
  });

  it('wakes a waiting worker when a key arrives', async () => {
    const { q } = setup();
    const next = q.get();
    q.add('ns/x');
    expect(await next).toBe('ns/x');
  });

  it('retries a failing key after an exponentially growing delay, and forgets it after success', () => {
    const { q, timers } = setup();
    expect(q.addRateLimited('ns/a')).toBe(100);
    expect(q.addRateLimited('ns/a')).toBe(200);
    timers.advance(99);
    expect(q.length).toBe(0);
    timers.advance(1);
    expect(q.length).toBe(1);
    expect(q.addRateLimited('ns/a')).toBe(400);
    q.forget('ns/a');
    expect(q.addRateLimited('ns/a')).toBe(100);
  });

  it('keeps the earlier of two delayed adds for one key', () => {
    const { q, timers } = setup();
    q.addAfter('ns/a', 500);
    q.addAfter('ns/a', 1000);
    q.addAfter('ns/a', 200);
    expect(timers.scheduled).toBe(1);
    timers.advance(200);
    expect(q.length).toBe(1);
  });

  it('releases waiting workers with undefined and ignores adds after shutdown', async () => {
    const { q, timers } = setup();
    const waiting = q.get();
    q.addAfter('ns/late', 100);
    q.shutDown();
    expect(await waiting).toBeUndefined();
    expect(timers.scheduled).toBe(0);
    q.add('ns/a');
    expect(await q.get()).toBeUndefined();
  });
});
