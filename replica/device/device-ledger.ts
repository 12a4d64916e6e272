/** One session's charge on the device, from before its load to its release. */
export interface DeviceCharge {
  readonly id: string;
  readonly bytes: number;
  /** The load was measured: the charge becomes `bytes`. No effect once freed. */
  settle(bytes: number): void;
  /** The session was released, or its load failed. Idempotent. */
  free(): void;
}

/**
 * The device bytes charged to the replica's sessions, against its budget. A charge is taken
 * before a load (its estimate), settled once the load is measured, and freed when the session
 * is released, not when it is evicted: an evicted model still serving a request holds its
 * memory. Charges, not model ids, are the keys: a swap loads a model's new version beside its old.
 */
export class DeviceLedger {
  private readonly charges = new Set<{ id: string; bytes: number }>();
  private usedBytes = 0;
  private waiters: (() => void)[] = [];

  constructor(
    readonly budget: number,
    /** Called with the bytes charged after each change, for the gauge. */
    private readonly onChange: (used: number) => void = () => undefined,
  ) {}

  get used(): number {
    return this.usedBytes;
  }

  /** What the sessions of `id` are charged, all its versions together. */
  costOf(id: string): number {
    let bytes = 0;
    for (const c of this.charges) if (c.id === id) bytes += c.bytes;
    return bytes;
  }

  charge(id: string, bytes: number): DeviceCharge {
    const entry = { id, bytes };
    this.charges.add(entry);
    this.move(bytes);
    return {
      id,
      get bytes() {
        return entry.bytes;
      },
      settle: (to: number) => {
        if (!this.charges.has(entry)) return;
        const from = entry.bytes;
        entry.bytes = to;
        this.move(to - from);
      },
      free: () => {
        if (this.charges.delete(entry)) this.move(-entry.bytes);
      },
    };
  }

  /** Resolves at the next change of what is charged, or after `ms`, whichever comes first. */
  changed(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private move(delta: number): void {
    this.usedBytes += delta;
    this.onChange(this.usedBytes);
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
