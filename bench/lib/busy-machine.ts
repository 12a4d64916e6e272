/** A run refused because the machine is busy; runBench prints the message alone and exits 1. */
export class BusyMachineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BusyMachineError';
  }
}

/**
 * Why a latency benchmark must not start on a machine whose 1-minute load average is
 * `loadAverage1m` over `cores` cores, or undefined when it may. `maxPerCore` is the most load
 * per core allowed (0: no check). Other work taking cores stretches every run, and a fixed
 * overhead then vanishes in the noise: bench:threads once reported the replica at 0.9× in-process
 * from a start at load 17.6, where an idle machine gave 1.15–1.19× (issue 52).
 */
export function busyReason(loadAverage1m: number, cores: number, maxPerCore: number): string | undefined {
  if (maxPerCore <= 0 || loadAverage1m <= maxPerCore * cores) return undefined;
  return (
    `refusing to start: the 1-minute load average is ${loadAverage1m.toFixed(2)} on ${cores} cores, above --max-load ${maxPerCore} per core (${(maxPerCore * cores).toFixed(2)}); ` +
    'wait for an idle machine, or pass --max-load 0 for a development run whose numbers do not count'
  );
}
