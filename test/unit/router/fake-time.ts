import type { Clock } from '../../../common/clock.js';
import type { SetTimer } from '../../../router/placement/balancer.js';

/** A stepped clock with timers that fire only when the test advances time. */
export class FakeTime implements Clock {
  private t = 0;
  private timers: { at: number; fn: () => void; live: boolean }[] = [];

  now(): number {
    return this.t;
  }

  readonly setTimer: SetTimer = (ms, fn) => {
    const timer = { at: this.t + ms, fn, live: true };
    this.timers.push(timer);
    return () => {
      timer.live = false;
    };
  };

  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const due = this.timers.filter((x) => x.live && x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.t = due.at;
      due.live = false;
      due.fn();
    }
    this.t = end;
  }
}

/** A random source that replays the given draws, then fails loudly if asked for more. */
export function draws(...values: number[]): () => number {
  let i = 0;
  return () => {
    const v = values[i++];
    if (v === undefined) throw new Error(`random drawn more than the ${values.length} fixed draws`);
    return v;
  };
}
