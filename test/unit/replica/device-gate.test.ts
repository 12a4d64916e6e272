import { expect } from '@jest/globals';
import { ModelmuxError } from '../../../common/errors.js';
import { DeviceGate, type EvictableCache } from '../../../replica/device/device-gate.js';
import { DeviceLedger } from '../../../replica/device/device-ledger.js';
import type { DeviceMeter } from '../../../replica/device/nvidia-smi.js';

/** A cache whose evicted models are released when the test says (their last request ended). */
class FakeCache implements EvictableCache {
  readonly evicted: string[] = [];
  constructor(
    public loadedIds: string[],
    private readonly onEvict: (id: string) => void,
  ) {}
  evict(id: string): void {
    this.loadedIds = this.loadedIds.filter((x) => x !== id);
    this.evicted.push(id);
    this.onEvict(id);
  }
}

const clock = { now: () => Date.now() };

describe('device gate', () => {
  it('evicts the least recently used models and loads once their memory is released', async () => {
    const ledger = new DeviceLedger(100);
    const charges = new Map([
      ['hot', ledger.charge('hot', 40)],
      ['cold', ledger.charge('cold', 40)],
    ]);
    // Released right after eviction, as a model no request holds is.
    const cache = new FakeCache(['hot', 'cold'], (id) => queueMicrotask(() => charges.get(id)?.free()));
    const gate = new DeviceGate(ledger, cache, clock, 1000);
    const charge = await gate.admit('new', 50);
    expect(cache.evicted).toEqual(['cold']);
    expect({ used: ledger.used, charged: charge.bytes }).toEqual({ used: 90, charged: 50 });
  });

  it('never evicts the model it loads: a swap loads the new version beside the old', async () => {
    const ledger = new DeviceLedger(100);
    const charges = new Map([
      ['m', ledger.charge('m', 40)],
      ['other', ledger.charge('other', 40)],
    ]);
    const cache = new FakeCache(['other', 'm'], (id) => queueMicrotask(() => charges.get(id)?.free()));
    await new DeviceGate(ledger, cache, clock, 1000).admit('m', 50);
    expect(cache.evicted).toEqual(['other']);
  });

  it('evicts once for a victim still serving a request, and loads when it is released', async () => {
    const ledger = new DeviceLedger(100);
    const busy = ledger.charge('busy', 60);
    ledger.charge('idle', 30);
    const cache = new FakeCache(['idle', 'busy'], () => undefined);
    const admitted = new DeviceGate(ledger, cache, clock, 5_000).admit('new', 40);
    await new Promise((r) => setTimeout(r, 10));
    ledger.charge('unrelated', 0).free(); // another change of the ledger: no second round of evictions
    await new Promise((r) => setTimeout(r, 10));
    busy.free();
    expect((await admitted).bytes).toBe(40);
    expect(cache.evicted).toEqual(['busy']);
  });

  it('refuses a model larger than the whole budget with model_too_large, evicting nothing', async () => {
    const ledger = new DeviceLedger(100);
    ledger.charge('a', 10);
    const cache = new FakeCache(['a'], () => undefined);
    const err = await new DeviceGate(ledger, cache, clock, 1000).admit('huge', 101).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelmuxError);
    expect(err).toMatchObject({ code: 'model_too_large', message: expect.stringMatching(/device budget/) });
    expect(cache.evicted).toEqual([]);
  });

  it('answers device_memory_full when models in use keep the room past the wait', async () => {
    const ledger = new DeviceLedger(100);
    ledger.charge('busy', 80); // evicted, but a request still holds it: never released here
    const cache = new FakeCache(['busy'], () => undefined);
    const err = await new DeviceGate(ledger, cache, clock, 50).admit('new', 50).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'device_memory_full' });
    expect(cache.evicted).toEqual(['busy']);
  });

  it('measures loads one at a time, so each difference is its own', async () => {
    let used = 500;
    const meter: DeviceMeter = { total: () => Promise.resolve(1000), used: () => Promise.resolve(used) };
    const gate = new DeviceGate(new DeviceLedger(1000), new FakeCache([], () => undefined), clock, 1000, meter);
    const load = (bytes: number) => async () => {
      await new Promise((r) => setTimeout(r, 5));
      used += bytes;
      return bytes;
    };
    const [a, b] = await Promise.all([gate.measure(load(100)), gate.measure(load(30))]);
    expect([a, b]).toEqual([
      { value: 100, measured: 100 },
      { value: 30, measured: 30 },
    ]);
  });
});
