import { BufferPool } from '../../../common/buffer-pool.js';

describe('BufferPool', () => {
  it('hands back a given buffer for a file of about its size, not for a much smaller one', () => {
    const pool = new BufferPool(4, 1 << 30);
    const a = pool.take(1_000_000);
    expect(a.length).toBeGreaterThanOrEqual(1_000_000);
    pool.give(a);
    expect(pool.take(100_000)).not.toBe(a);
    expect(pool.take(999_000)).toBe(a);
    expect(pool.freeCount).toBe(0);
  });

  it('hands back the buffer it allocated for a size even when rounding made it more than a quarter larger', () => {
    const pool = new BufferPool(4, 1 << 30);
    const a = pool.take(100_000);
    expect(a.length).toBe(131_072);
    pool.give(a);
    expect(pool.take(100_000) === a).toBe(true);
  });

  it('takes the smallest buffer that fits', () => {
    const pool = new BufferPool(4, 1 << 30);
    const big = pool.take(1_200_000);
    const small = pool.take(1_000_000);
    pool.give(big);
    pool.give(small);
    expect(pool.take(1_000_000)).toBe(small);
    expect(pool.take(1_000_000)).toBe(big);
  });

  it('keeps at most maxFree buffers and maxFreeBytes, dropping the oldest', () => {
    const pool = new BufferPool(2, 1 << 30);
    const [a, b, c] = [pool.take(65536), pool.take(65536), pool.take(65536)];
    pool.give(a);
    pool.give(b);
    pool.give(c);
    expect(pool.freeCount).toBe(2);
    expect([pool.take(65536), pool.take(65536)]).toEqual(expect.arrayContaining([b, c]));
    const bounded = new BufferPool(10, 100_000);
    const [d, e] = [bounded.take(65536), bounded.take(65536)];
    bounded.give(d);
    bounded.give(e);
    expect(bounded.freeCount).toBe(1);
    expect(bounded.take(65536)).toBe(e);
  });
});
