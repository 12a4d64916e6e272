import type { Clock } from '../../common/clock.js';
import { ModelmuxError } from '../../common/errors.js';
import { planDeviceAdmission } from './device-admission.js';
import type { DeviceCharge, DeviceLedger } from './device-ledger.js';
import type { DeviceMeter } from './nvidia-smi.js';
import { measuredDeviceBytes } from './device-cost.js';

/** The part of the model cache the gate evicts from. */
export interface EvictableCache {
  /** Loaded models, most recently used first (ModelCache.loadedIds). */
  readonly loadedIds: readonly string[];
  evict(id: string): void;
}

const GIB = 1024 ** 3;
const gib = (n: number): string => `${(n / GIB).toFixed(2)} GiB`;

/**
 * Holds loads to the device budget: before a load, evicts least recently used models until the
 * newcomer's estimate fits and waits for their sessions to be released; refuses a model larger
 * than the whole budget (`model_too_large`), and one that still does not fit after `waitMs`
 * because models in use or loading hold the rest (`device_memory_full`, a router retries it
 * elsewhere). The rule itself is planDeviceAdmission's; this is its loop.
 */
export class DeviceGate {
  /** Measured loads run one at a time, so a difference of samples is one load's. */
  private measuring: Promise<unknown> = Promise.resolve();

  constructor(
    readonly ledger: DeviceLedger,
    private readonly cache: EvictableCache,
    private readonly clock: Clock,
    private readonly waitMs: number,
    private readonly meter?: DeviceMeter,
  ) {}

  /** A charge of `need` bytes for a load of `id`, once it fits. */
  async admit(id: string, need: number): Promise<DeviceCharge> {
    const { ledger } = this;
    const deadline = this.clock.now() + this.waitMs;
    /** Evicted by this load and not yet released: counted as freed, so a replan evicts no more for them. */
    const evicted = new Set<string>();
    for (;;) {
      // Never the model itself: a swap loads its new version beside the old one, which serves on.
      const loaded = [...this.cache.loadedIds]
        .reverse()
        .filter((v) => v !== id)
        .map((v) => ({ id: v, bytes: ledger.costOf(v) }));
      const releasing = [...evicted].reduce((n, v) => n + ledger.costOf(v), 0);
      const plan = planDeviceAdmission(ledger.budget, ledger.used, releasing, loaded, need);
      if (plan.kind === 'fits') return ledger.charge(id, need);
      if (plan.kind === 'never') throw new ModelmuxError('model_too_large', `model "${id}" needs about ${gib(need)} of device memory, more than this replica's device budget of ${gib(ledger.budget)}`);
      for (const victim of plan.victims) {
        evicted.add(victim);
        this.cache.evict(victim);
      }
      const left = deadline - this.clock.now();
      if (left <= 0) {
        throw new ModelmuxError(
          'device_memory_full',
          `model "${id}" needs about ${gib(need)} of device memory; ${gib(ledger.used)} of the ${gib(ledger.budget)} budget is held by models in use or loading`,
        );
      }
      await ledger.changed(left);
    }
  }

  /**
   * Runs `load` (open and warm-up) and measures the device memory it took, when there is a
   * meter: one measured load at a time. The measurement is undefined when it cannot be taken.
   */
  async measure<T>(load: () => Promise<T>): Promise<{ value: T; measured: number | undefined }> {
    const meter = this.meter;
    if (!meter) return { value: await load(), measured: undefined };
    const turn = this.measuring.then(async () => {
      const before = await meter.used();
      const value = await load();
      return { value, measured: measuredDeviceBytes(before, await meter.used()) };
    });
    this.measuring = turn.catch(() => undefined);
    return turn;
  }
}
