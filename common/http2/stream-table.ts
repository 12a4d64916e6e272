/**
 * The open streams of one HTTP/2 connection, by id. A connection's stream ids only grow (RFC 9113
 * §5.1.1), so a stream opened is appended and the array stays sorted by id: `get` is a binary
 * search and `delete` a splice, over at most the connection's concurrent streams. Not a Map,
 * which every call would churn: common/slot-set.ts says what that costs.
 */
export class StreamTable<T extends { readonly id: number }> {
  private readonly streams: T[] = [];

  get size(): number {
    return this.streams.length;
  }

  get(id: number): T | undefined {
    const i = this.indexOf(id);
    return i < 0 ? undefined : this.streams[i];
  }

  has(id: number): boolean {
    return this.indexOf(id) >= 0;
  }

  /** Adds a stream whose id is above every id in the table (the caller checked it against the connection's last). */
  add(stream: T): void {
    const last = this.streams[this.streams.length - 1];
    if (last !== undefined && last.id >= stream.id) throw new Error(`stream ${stream.id} opened after stream ${last.id}`);
    this.streams.push(stream);
  }

  delete(id: number): boolean {
    const i = this.indexOf(id);
    if (i < 0) return false;
    this.streams.splice(i, 1);
    return true;
  }

  /** The streams now, by id: a copy, so the table may change while it is gone through. */
  values(): T[] {
    return this.streams.slice();
  }

  private indexOf(id: number): number {
    let lo = 0;
    let hi = this.streams.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const at = (this.streams[mid] as T).id;
      if (at === id) return mid;
      if (at < id) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }
}
