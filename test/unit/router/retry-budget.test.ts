import { MIN_PER_SECOND, RetryBudget, WINDOW_MS } from '../../../router/placement/retry-budget.js';

const FLOOR = (MIN_PER_SECOND * WINDOW_MS) / 1000;

/** Retries the budget grants at `now` until it refuses one. */
function drain(b: RetryBudget, now: number): number {
  let n = 0;
  while (b.tryRetry(now)) n++;
  return n;
}

describe('RetryBudget', () => {
  it('grants a quiet pool its floor of retries per window', () => {
    expect(drain(new RetryBudget(20), 0)).toBe(FLOOR);
  });

  it('grants the given share of the window’s requests on top of the floor', () => {
    const b = new RetryBudget(20);
    for (let i = 0; i < 1000; i++) b.requested(i * 5);
    expect(drain(b, 5000)).toBe(FLOOR + 200);
  });

  it('keeps retries to that share however many tries fail: an overload is not multiplied', () => {
    const b = new RetryBudget(20);
    let retries = 0;
    // 100 requests a second for a minute, every one of which would retry.
    for (let t = 0; t < 60_000; t += 10) {
      b.requested(t);
      if (b.tryRetry(t)) retries++;
    }
    expect(retries / 6000).toBeLessThanOrEqual(0.2 + FLOOR / 1000);
    expect(retries / 6000).toBeGreaterThan(0.19);
  });

  it('forgets requests and retries older than the window, slice by slice', () => {
    const b = new RetryBudget(50);
    for (let i = 0; i < 100; i++) b.requested(0);
    expect(drain(b, 0)).toBe(FLOOR + 50);
    // Still inside the window: nothing new to spend.
    expect(b.tryRetry(WINDOW_MS - 1)).toBe(false);
    // The first slice has aged out with its requests and its retries: the floor is back.
    expect(drain(b, WINDOW_MS)).toBe(FLOOR);
  });

  it('takes a new share at once', () => {
    const b = new RetryBudget(0);
    for (let i = 0; i < 100; i++) b.requested(0);
    expect(drain(b, 0)).toBe(FLOOR);
    b.configure(10);
    expect(drain(b, 0)).toBe(10);
  });
});
