import type { Clock } from '../../common/clock.js';

/**
 * How hot a replica's cache is: requests served, decayed exponentially with time constant
 * `tauMs`. It becomes `controller.kubernetes.io/pod-deletion-cost`, so that scale-down
 * removes the replica whose loss costs the fewest warm requests.
 */
export class HotnessMeter {
  private value = 0;
  private at: number;

  constructor(
    private readonly clock: Clock,
    private readonly tauMs = 60_000,
  ) {
    this.at = clock.now();
  }

  hit(): void {
    this.decay();
    this.value += 1;
  }

  /** The deletion cost: a non-negative int32. */
  cost(): number {
    this.decay();
    return Math.min(2_147_483_647, Math.round(this.value));
  }

  private decay(): void {
    const now = this.clock.now();
    if (now > this.at) this.value *= Math.exp(-(now - this.at) / this.tauMs);
    this.at = now;
  }
}
