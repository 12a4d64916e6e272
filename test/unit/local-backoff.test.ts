import { LOCAL_RESTART_BACKOFF, RestartBackoff } from '../../cli/local-backoff.js';

describe("local mode's restart backoff", () => {
  it('waits 0.5 s after a first crash, doubling up to 30 s while the process keeps crashing at once', () => {
    const b = new RestartBackoff(LOCAL_RESTART_BACKOFF);
    const waits = Array.from({ length: 10 }, () => b.next(100));
    expect(waits).toEqual([500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000]);
  });

  it('starts over at 0.5 s once a process ran for a minute before it died', () => {
    const b = new RestartBackoff(LOCAL_RESTART_BACKOFF);
    for (let i = 0; i < 4; i++) b.next(1000);
    expect(b.next(59_999)).toBe(8000);
    expect(b.next(60_000)).toBe(500);
    expect(b.next(10)).toBe(1000);
  });

  it('stays at the cap however many times a process crashes', () => {
    const b = new RestartBackoff({ initialMs: 1, maxMs: 7, resetAfterMs: 1000 });
    for (let i = 0; i < 5000; i++) b.next(0);
    expect(b.next(0)).toBe(7);
  });
});
