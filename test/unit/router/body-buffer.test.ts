import { BufferPool } from '../../../common/buffer-pool.js';
import { BodyBuffer } from '../../../router/exchange/body-buffer.js';

describe('BodyBuffer', () => {
  it('goes back to the pool only when the exchange and every write holding it have let go', () => {
    const pool = new BufferPool(4, 1 << 30);
    const body = BodyBuffer.take(pool, 100_000);
    expect(body.bytes.length).toBeGreaterThanOrEqual(100_000);
    body.retain();
    body.retain();
    body.release();
    body.release();
    expect(pool.freeCount).toBe(0);
    body.release();
    expect(pool.freeCount).toBe(1);
    expect(pool.take(100_000) === body.bytes).toBe(true);
  });
});
