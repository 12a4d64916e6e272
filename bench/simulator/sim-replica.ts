import type { EventQueue } from './event-queue.js';

/**
 * A simulated replica: an LRU of `slots` models loaded on demand (loads run in parallel, as
 * downloads and session creation are I/O bound), one compute unit serving inferences in
 * arrival-of-readiness order, and the maxOngoingRequests admission a real replica enforces
 * with a 503 so the router tries elsewhere.
 */
export interface SimRequest {
  model: string;
  arrivedAt: number;
}

interface Entry {
  ready: boolean;
  lastUse: number;
  waiting: (() => void)[];
}

export interface ReplicaParams {
  slots: number;
  maxOngoingRequests: number;
  inferMs: number;
  loadMs: number;
}

export class SimReplica {
  inFlight = 0;
  loads = 0;
  version = 0;
  private readonly models = new Map<string, Entry>();
  private computeFreeAt = 0;

  constructor(
    readonly name: string,
    private readonly params: ReplicaParams,
    private readonly events: EventQueue,
  ) {}

  /** The table it would publish: loaded and loading models. */
  table(): { version: number; loaded: string[]; loading: string[]; capacity: number } {
    const loaded: string[] = [];
    const loading: string[] = [];
    // Most recently used first, as the real replica's lru-cache lists its keys.
    const byUse = [...this.models].sort((a, b) => b[1].lastUse - a[1].lastUse);
    for (const [m, e] of byUse) (e.ready ? loaded : loading).push(m);
    return { version: this.version, loaded, loading, capacity: this.params.slots };
  }

  /** Admits the request (false: full, the 503 a router retries) and calls `done` when it has run. */
  admit(req: SimRequest, done: (cache: 'hit' | 'miss') => void): boolean {
    if (this.inFlight >= this.params.maxOngoingRequests) return false;
    this.inFlight++;
    const now = this.events.now();
    let e = this.models.get(req.model);
    const cache = e?.ready === true ? 'hit' : 'miss';
    if (e === undefined) {
      this.evictFor();
      e = { ready: false, lastUse: now, waiting: [] };
      this.models.set(req.model, e);
      this.loads++;
      this.version++;
      const entry = e;
      this.events.schedule(this.params.loadMs, () => {
        entry.ready = true;
        this.version++;
        for (const w of entry.waiting.splice(0)) w();
      });
    }
    e.lastUse = now;
    const run = (): void => this.compute(() => done(cache));
    if (e.ready) run();
    else e.waiting.push(run);
    return true;
  }

  private compute(done: () => void): void {
    const now = this.events.now();
    const start = Math.max(now, this.computeFreeAt);
    this.computeFreeAt = start + this.params.inferMs;
    this.events.schedule(this.computeFreeAt - now, () => {
      this.inFlight--;
      done();
    });
  }

  /**
   * Drops least recently used loaded models until a slot is free. Only loading models may
   * push the count past the slots for a moment, as in the real cache (a load in flight is
   * never cancelled).
   */
  private evictFor(): void {
    while (this.models.size >= this.params.slots) {
      let victim: string | undefined;
      let oldest = Infinity;
      for (const [m, e] of this.models) {
        if (e.ready && e.lastUse < oldest) {
          oldest = e.lastUse;
          victim = m;
        }
      }
      if (victim === undefined) return;
      this.models.delete(victim);
      this.version++;
    }
  }
}
