import { IsoTime } from '../../common/iso-time.js';

describe('IsoTime', () => {
  it('prints what Date#toISOString prints, across seconds, days and years, forwards and backwards', () => {
    const t = new IsoTime();
    const base = Date.UTC(2026, 11, 31, 23, 59, 58, 0);
    const times = [
      base,
      base + 1,
      base + 999,
      base + 1000,
      base + 1999,
      base + 2000,
      base + 2001,
      base + 999,
      base - 1,
      base,
      0,
      1,
      999,
      1000,
      Date.UTC(2000, 1, 29, 12, 0, 0, 7),
      1_764_806_400_123,
      1_764_806_400_123.9,
      253_402_300_799_999,
      -1,
      -1000,
      -999,
      253_402_300_800_000,
      base,
    ];
    for (const ms of times) expect([ms, t.format(ms)]).toEqual([ms, new Date(ms).toISOString()]);
  });

  it('keeps printing right over a run of consecutive milliseconds', () => {
    const t = new IsoTime();
    const start = Date.UTC(2026, 5, 30, 23, 59, 57, 500);
    const wrong: number[] = [];
    for (let ms = start; ms < start + 4000; ms += 1) if (t.format(ms) !== new Date(ms).toISOString()) wrong.push(ms);
    expect(wrong).toEqual([]);
  });
});
