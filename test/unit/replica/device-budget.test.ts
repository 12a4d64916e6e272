import { expect, jest } from '@jest/globals';
import { deviceHeadroom, resolveDeviceBudget } from '../../../replica/device/device-budget.js';
import { estimateDeviceBytes, measuredDeviceBytes, settledDeviceBytes } from '../../../replica/device/device-cost.js';
import { planDeviceAdmission } from '../../../replica/device/device-admission.js';
import { DeviceLedger } from '../../../replica/device/device-ledger.js';

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

describe('device budget', () => {
  it('leaves 10% of a large GPU and at least 1 GiB of a small one unbudgeted', () => {
    expect(deviceHeadroom(80 * GIB)).toBe(8 * GIB);
    expect(deviceHeadroom(8 * GIB)).toBe(GIB);
  });

  it('defaults under cuda from the GPU memory, takes a configured budget as is, and has none under cpu', async () => {
    const total = jest.fn(() => Promise.resolve(80 * GIB));
    expect(await resolveDeviceBudget('cuda', undefined, total)).toBe(72 * GIB);
    expect(await resolveDeviceBudget('cuda', 10 * GIB, total)).toBe(10 * GIB);
    expect(await resolveDeviceBudget('cpu', 10 * GIB, total)).toBeUndefined();
    expect(total).toHaveBeenCalledTimes(1);
  });
});

describe('device cost', () => {
  it('estimates weights, half again for activations, and a floor', () => {
    expect(estimateDeviceBytes(100 * MIB)).toBe(182 * MIB);
    expect(estimateDeviceBytes(0)).toBe(32 * MIB);
  });

  it('measures a load as the difference of samples, except the first one which carries the CUDA context', () => {
    expect(measuredDeviceBytes(600 * MIB, 700 * MIB)).toBe(100 * MIB);
    expect(measuredDeviceBytes(0, 700 * MIB)).toBeUndefined();
    expect(measuredDeviceBytes(600 * MIB, undefined)).toBeUndefined();
    expect(measuredDeviceBytes(700 * MIB, 600 * MIB)).toBe(0);
  });

  it('charges an own session what it measured and a shared-graph model its estimate', () => {
    expect(settledDeviceBytes('own_session', 182 * MIB, 120 * MIB)).toBe(120 * MIB);
    expect(settledDeviceBytes('own_session', 182 * MIB, undefined)).toBe(182 * MIB);
    expect(settledDeviceBytes('shared_graph', 40 * MIB, 0)).toBe(40 * MIB);
  });
});

describe('device admission', () => {
  const loaded = [
    { id: 'oldest', bytes: 3 },
    { id: 'older', bytes: 3 },
    { id: 'newest', bytes: 3 },
  ];

  it('loads at once what fits beside what is charged', () => {
    expect(planDeviceAdmission(10, 9, 0, loaded, 1)).toEqual({ kind: 'fits' });
  });

  it('evicts the least recently used models, as few as make room', () => {
    expect(planDeviceAdmission(10, 9, 0, loaded, 3)).toEqual({ kind: 'evict', victims: ['oldest'] });
    expect(planDeviceAdmission(10, 9, 0, loaded, 5)).toEqual({ kind: 'evict', victims: ['oldest', 'older'] });
  });

  it('waits when models in use or loading hold what evicting every loaded model would not free', () => {
    // 9 loaded + 1 loading elsewhere: evicting all frees 9, leaving 1 + 10 > 10.
    expect(planDeviceAdmission(10, 10, 0, loaded, 10)).toEqual({ kind: 'wait', victims: ['oldest', 'older', 'newest'] });
  });

  it('evicts no more while what it evicted before is still being released', () => {
    // 'gone' (3) was evicted for this load and still serves a request: waiting for it is enough.
    expect(planDeviceAdmission(10, 12, 3, loaded, 1)).toEqual({ kind: 'evict', victims: [] });
    expect(planDeviceAdmission(10, 12, 3, loaded, 4)).toEqual({ kind: 'evict', victims: ['oldest'] });
  });

  it('never loads a model larger than the whole budget', () => {
    expect(planDeviceAdmission(10, 0, 0, [], 11)).toEqual({ kind: 'never' });
  });
});

describe('device ledger', () => {
  it('charges an estimate, settles it to the measurement, and frees it once', () => {
    const seen: number[] = [];
    const ledger = new DeviceLedger(100, (used) => seen.push(used));
    const a = ledger.charge('a', 30);
    const b = ledger.charge('b', 20);
    a.settle(10);
    expect({ used: ledger.used, a: ledger.costOf('a'), b: ledger.costOf('b') }).toEqual({ used: 30, a: 10, b: 20 });
    a.free();
    a.free();
    a.settle(50);
    expect(ledger.used).toBe(20);
    expect(seen).toEqual([30, 50, 30, 20]);
    b.free();
    expect(ledger.used).toBe(0);
  });

  it('counts both versions of a model while a swap holds them', () => {
    const ledger = new DeviceLedger(100);
    ledger.charge('m', 30);
    ledger.charge('m', 35);
    expect(ledger.costOf('m')).toBe(65);
  });

  it('wakes a waiter at the next change', async () => {
    const ledger = new DeviceLedger(100);
    const c = ledger.charge('a', 30);
    const woke = ledger.changed(60_000);
    c.free();
    await woke;
    expect(ledger.used).toBe(0);
  });
});
