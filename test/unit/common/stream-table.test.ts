import { StreamTable } from '../../../common/http2/stream-table.js';

describe('StreamTable', () => {
  it('finds open streams by id, in id order, and forgets the closed ones', () => {
    const t = new StreamTable<{ id: number }>();
    for (const id of [1, 3, 5, 9, 11]) t.add({ id });
    expect(t.get(9)).toEqual({ id: 9 });
    expect(t.get(7)).toBeUndefined();
    expect(t.delete(5)).toBe(true);
    expect(t.delete(5)).toBe(false);
    expect([t.has(1), t.has(5), t.has(11)]).toEqual([true, false, true]);
    expect(t.values().map((s) => s.id)).toEqual([1, 3, 9, 11]);
    expect(t.size).toBe(4);
    t.add({ id: 13 });
    expect(t.get(13)).toEqual({ id: 13 });
  });

  it('refuses a stream id that is not above every open one', () => {
    const t = new StreamTable<{ id: number }>();
    t.add({ id: 7 });
    expect(() => t.add({ id: 5 })).toThrow('stream 5 opened after stream 7');
    expect(() => t.add({ id: 7 })).toThrow();
    expect(t.size).toBe(1);
  });
});
