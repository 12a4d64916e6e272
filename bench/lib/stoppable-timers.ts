/** The timers of a load that runs until stopped: none fires after `stop`, and `stop` clears them all. */
export class StoppableTimers {
  stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  after(ms: number, f: () => void): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.stopped) f();
    }, ms);
    this.timers.add(t);
  }

  every(ms: number, f: () => void): void {
    this.after(ms, () => {
      f();
      this.every(ms, f);
    });
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
