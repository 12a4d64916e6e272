import { nextCheck } from '../../../replica/cache/revalidation-schedule.js';

const pace = { intervalMs: 60_000, perSecond: 10 };
const v = (id: string, checkedAt: number) => ({ id, version: `${id}-etag`, checkedAt });

describe('the revalidation schedule of loaded models', () => {
  it('waits a whole interval when nothing is loaded', () => {
    expect(nextCheck([], 5, pace, undefined)).toEqual({ waitMs: 60_000 });
  });

  it('waits until the model confirmed longest ago is an interval old', () => {
    expect(nextCheck([v('a', 10_000), v('b', 4000)], 30_000, pace, undefined)).toEqual({ waitMs: 34_000 });
  });

  it('checks the model confirmed longest ago first, once it is due', () => {
    expect(nextCheck([v('a', 10_000), v('b', 4000), v('c', 7000)], 70_000, pace, undefined)).toEqual({ check: v('b', 4000) });
  });

  it('spaces questions to the store by 1/perSecond however many models are due', () => {
    const due = [v('a', 0), v('b', 0), v('c', 0)];
    expect(nextCheck(due, 100_000, pace, 99_950)).toEqual({ waitMs: 50 });
    expect(nextCheck(due, 100_000, pace, 99_900)).toEqual({ check: v('a', 0) });
  });

  it('checks every one of many loaded models within count/perSecond once all are due, never faster', () => {
    const loaded = Array.from({ length: 50 }, (_, i) => v(`m${i}`, i));
    let now = 60_000 + 50;
    let last: number | undefined;
    const order: string[] = [];
    while (order.length < 50) {
      const next = nextCheck(loaded, now, pace, last);
      if ('waitMs' in next) {
        now += next.waitMs;
        continue;
      }
      order.push(next.check.id);
      last = now;
      next.check.checkedAt = now;
    }
    expect(order).toEqual(loaded.map((l) => l.id));
    // 50 questions at 10 a second: the last one 4.9 s after the first.
    expect(now - (60_000 + 50)).toBeCloseTo(4900, 6);
  });
});
