import { Deadlines, deadlineResolutionMs, type Expiring } from '../../../router/exchange/deadlines.js';
import { FakeTime } from './fake-time.js';

function entry(deadlineAt: number, fired: string[], name: string): Expiring {
  return { deadlineAt, expire: () => void fired.push(name), deadlineSlot: -1 };
}

describe('Deadlines', () => {
  it('expires each request once, no earlier than its deadline and at most one sweep later', () => {
    const time = new FakeTime();
    const d = new Deadlines(time, time.setTimer, 100);
    const fired: string[] = [];
    d.add(entry(250, fired, 'a'));
    d.add(entry(120, fired, 'b'));
    time.advance(100);
    expect(fired).toEqual([]);
    time.advance(100);
    expect(fired).toEqual(['b']);
    time.advance(100);
    expect(fired).toEqual(['b', 'a']);
    time.advance(1000);
    expect(fired).toEqual(['b', 'a']);
    expect(d.size).toBe(0);
  });

  it('never expires a request removed before its deadline, and stops sweeping when none is left', () => {
    const time = new FakeTime();
    let timers = 0;
    const d = new Deadlines(time, (ms, fn) => (timers++, time.setTimer(ms, fn)), 50);
    const fired: string[] = [];
    const a = entry(60, fired, 'a');
    d.add(a);
    d.add(entry(500, fired, 'b'));
    d.remove(a);
    time.advance(1000);
    expect(fired).toEqual(['b']);
    const before = timers;
    time.advance(1000);
    expect(timers).toBe(before);
  });

  it('does not expire a request that an earlier expiry in the same sweep ended, and sweeps one re-added later', () => {
    const time = new FakeTime();
    const d = new Deadlines(time, time.setTimer, 100);
    const fired: string[] = [];
    const b = entry(50, fired, 'b');
    const again = entry(60, fired, 'again');
    const a: Expiring = {
      deadlineAt: 40,
      deadlineSlot: -1,
      expire: () => {
        fired.push('a');
        d.remove(b);
      },
    };
    d.add(a);
    d.add(b);
    d.add(again);
    again.expire = () => {
      fired.push('again');
      (again as { deadlineAt: number }).deadlineAt = 250;
      d.add(again);
    };
    time.advance(100);
    expect(fired).toEqual(['a', 'again']);
    expect(d.size).toBe(1);
    time.advance(200);
    expect(fired).toEqual(['a', 'again', 'again']);
  });

  it('sweeps at a twentieth of the request timeout, at most every 100 ms', () => {
    expect(deadlineResolutionMs(60_000)).toBe(100);
    expect(deadlineResolutionMs(500)).toBe(25);
    expect(deadlineResolutionMs(1)).toBe(1);
  });
});
