/** A min-heap of timed callbacks: the simulator's virtual time. Equal times run in schedule order. */
export class EventQueue {
  private heap: { at: number; seq: number; fn: () => void; live: boolean }[] = [];
  private seq = 0;
  private t = 0;

  now(): number {
    return this.t;
  }

  /** Runs `fn` `delay` ms from now; returns a cancel function. */
  schedule(delay: number, fn: () => void): () => void {
    const e = { at: this.t + Math.max(0, delay), seq: this.seq++, fn, live: true };
    this.heap.push(e);
    this.up(this.heap.length - 1);
    return () => {
      e.live = false;
    };
  }

  /** Runs events in time order until none is left or the next is past `until`. */
  run(until: number): void {
    while (this.heap.length > 0) {
      const top = this.heap[0];
      if (top === undefined || top.at > until) break;
      this.pop();
      this.t = top.at;
      if (top.live) top.fn();
    }
  }

  private less(i: number, j: number): boolean {
    const a = this.heap[i];
    const b = this.heap[j];
    if (a === undefined || b === undefined) return false;
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  private swap(i: number, j: number): void {
    const a = this.heap[i];
    const b = this.heap[j];
    if (a === undefined || b === undefined) return;
    this.heap[i] = b;
    this.heap[j] = a;
  }

  private up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  private pop(): void {
    const last = this.heap.pop();
    if (last === undefined || this.heap.length === 0) return;
    this.heap[0] = last;
    for (let i = 0; ;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < this.heap.length && this.less(l, m)) m = l;
      if (r < this.heap.length && this.less(r, m)) m = r;
      if (m === i) break;
      this.swap(i, m);
      i = m;
    }
  }
}
