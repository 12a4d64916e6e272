/** A loaded model the cache could evict, with what it is charged on the device. */
export interface DeviceVictim {
  id: string;
  bytes: number;
}

/**
 * What to do so that a model charged `need` bytes may load:
 * - `fits`: load now (reserve first, so a concurrent load sees it);
 * - `evict`: evict `victims` and wait for their sessions to be released, then plan again;
 * - `wait`: even evicting every loaded model leaves too little, because loads under way or
 *   evicted models still serving a request hold the rest: evict `victims`, wait, plan again;
 * - `never`: the model is larger than the whole budget.
 */
export type DeviceAdmission = { kind: 'fits' } | { kind: 'evict' | 'wait'; victims: string[] } | { kind: 'never' };

/**
 * The admission rule of the device budget, "never load past it". `reserved` is every byte
 * charged now: loaded models, models loading, evicted models not yet released; `releasing` the
 * part of it this load already evicted, freed once their last request ends. `loaded` are the
 * cache's models, least recently used first: the victims are taken in that order, as few as make
 * room beside what is being released (none when that is enough: `evict` with no victims is a
 * wait). Pure: the caller evicts, waits and asks again, so the rule is tested without a GPU.
 */
export function planDeviceAdmission(budget: number, reserved: number, releasing: number, loaded: readonly DeviceVictim[], need: number): DeviceAdmission {
  if (need > budget) return { kind: 'never' };
  if (reserved + need <= budget) return { kind: 'fits' };
  const victims: string[] = [];
  let freed = releasing;
  const room = (): boolean => reserved - freed + need <= budget;
  if (room()) return { kind: 'evict', victims };
  for (const v of loaded) {
    victims.push(v.id);
    freed += v.bytes;
    if (room()) return { kind: 'evict', victims };
  }
  return { kind: 'wait', victims };
}
