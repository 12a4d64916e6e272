/**
 * How often each model was asked for lately: a count per id, all halved every `window`
 * requests, so that old popularity fades and ids asked for once drop out (the map stays about
 * as large as the ids of the last two windows). TinyLFU's reset, without the sketch: a replica
 * sees thousands of ids, not millions.
 */
export class FrequencySketch {
  private readonly counts = new Map<string, number>();
  private added = 0;

  constructor(private readonly window: number) {}

  add(id: string): void {
    this.counts.set(id, (this.counts.get(id) ?? 0) + 1);
    if (++this.added < this.window) return;
    this.added = 0;
    for (const [k, v] of this.counts) {
      if (v < 2) this.counts.delete(k);
      else this.counts.set(k, v >> 1);
    }
  }

  count(id: string): number {
    return this.counts.get(id) ?? 0;
  }

  get size(): number {
    return this.counts.size;
  }
}
