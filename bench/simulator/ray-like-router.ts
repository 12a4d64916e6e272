import type { Random } from '../../common/clock.js';
import type { AcquireResult, Lease, SetTimer } from '../../router/placement/balancer.js';
import type { EventQueue } from './event-queue.js';

/**
 * The Ray Serve baseline: holders only from the (delayed) tables; among holders below
 * maxOngoingRequests the less busy of two; with no holder, a random replica among those with
 * the fewest models; when every holder is full, wait the matching timeout drawn in [t, 2t],
 * then the same fewest-models choice. No memory of its own sends, no shared hashing.
 */
export class RayLikeRouter {
  private readonly inFlight = new Map<string, number>();
  private readonly tables = new Map<string, Set<string>>();
  private readonly waiters: { model: string; exclude: ReadonlySet<string>; since: number; timedOut: boolean; cancel: () => void; done: (r: AcquireResult) => void }[] = [];

  constructor(
    replicas: readonly string[],
    private readonly max: number,
    private readonly matchTimeoutMs: number,
    private readonly events: EventQueue,
    private readonly random: Random,
    private readonly setTimer: SetTimer,
  ) {
    for (const r of replicas) {
      this.inFlight.set(r, 0);
      this.tables.set(r, new Set());
    }
  }

  setTable(name: string, table: { loaded: readonly string[]; loading: readonly string[] }): void {
    this.tables.set(name, new Set([...table.loaded, ...table.loading]));
    this.drain();
  }

  observe(): void {
    // Ray's router learns holders only from the controller's broadcast.
  }

  release(lease: Lease): void {
    const name = lease.replica;
    this.inFlight.set(name, Math.max(0, (this.inFlight.get(name) ?? 0) - 1));
    this.drain();
  }

  acquire(model: string | undefined, done: (r: AcquireResult) => void, exclude: ReadonlySet<string> = new Set()): () => void {
    const w = { model: model ?? '', exclude, since: this.events.now(), timedOut: false, cancel: () => undefined as void, done };
    if (this.place(w)) return () => undefined;
    const t = this.matchTimeoutMs;
    w.cancel = this.setTimer(t + this.random() * t, () => {
      w.timedOut = true;
      this.drain();
    });
    this.waiters.push(w);
    return () => undefined;
  }

  private place(w: (typeof this.waiters)[number]): boolean {
    const open = [...this.inFlight].filter(([n, f]) => f < this.max && !w.exclude.has(n)).map(([n]) => n);
    const holders = [...this.tables].filter(([n, s]) => s.has(w.model) && !w.exclude.has(n)).map(([n]) => n);
    const openHolders = holders.filter((n) => open.includes(n));
    let pick: string | undefined;
    let kind: 'holder' | 'cold' | 'fallback_after_timeout' = 'holder';
    if (openHolders.length > 0) {
      const a = openHolders[Math.floor(this.random() * openHolders.length)] ?? '';
      const b = openHolders[Math.floor(this.random() * openHolders.length)] ?? '';
      pick = (this.inFlight.get(b) ?? 0) < (this.inFlight.get(a) ?? 0) ? b : a;
    } else if ((holders.length === 0 || w.timedOut) && open.length > 0) {
      const fewest = Math.min(...open.map((n) => this.tables.get(n)?.size ?? 0));
      const least = open.filter((n) => (this.tables.get(n)?.size ?? 0) === fewest);
      pick = least[Math.floor(this.random() * least.length)];
      kind = holders.length === 0 ? 'cold' : 'fallback_after_timeout';
    }
    if (pick === undefined) return false;
    this.inFlight.set(pick, (this.inFlight.get(pick) ?? 0) + 1);
    w.cancel();
    w.done({ ok: true, lease: { replica: pick, model: w.model, kind, waitedMs: this.events.now() - w.since, warm: kind === 'holder' } });
    return true;
  }

  private drain(): void {
    for (let i = 0; i < this.waiters.length;) {
      const w = this.waiters[i];
      if (w === undefined) break;
      this.waiters.splice(i, 1);
      if (!this.place(w)) this.waiters.splice(i++, 0, w);
    }
  }
}
