import { createLogger } from '../../common/log.js';
import { LineBatch } from '../../common/line-batch.js';

describe('LineBatch', () => {
  it('gathers lines into one write until the flush', () => {
    const writes: string[] = [];
    const batch = new LineBatch((s) => void writes.push(s), 60_000);
    batch.add('{"a":1}', false);
    batch.add('{"a":2}', false);
    expect(writes).toEqual([]);
    batch.flush();
    expect(writes).toEqual(['{"a":1}\n{"a":2}\n']);
    batch.flush();
    expect(writes).toHaveLength(1);
  });

  it('writes an urgent line at once, after the lines buffered before it', () => {
    const writes: string[] = [];
    const batch = new LineBatch((s) => void writes.push(s), 60_000);
    batch.add('first', false);
    batch.add('urgent', true);
    expect(writes).toEqual(['first\nurgent\n']);
  });

  it('writes once the buffer is full, and within the flush interval without being asked', async () => {
    const writes: string[] = [];
    const batch = new LineBatch((s) => void writes.push(s), 5, 10);
    batch.add('0123456789', false);
    expect(writes).toEqual(['0123456789\n']);
    batch.add('late', false);
    await new Promise((r) => setTimeout(r, 50));
    expect(writes).toEqual(['0123456789\n', 'late\n']);
  });

  it('takes a logger: info lines wait, warnings and errors go out at once', () => {
    const writes: string[] = [];
    const batch = new LineBatch((s) => void writes.push(s), 60_000);
    const log = createLogger({ component: 'replica' }, batch.add);
    log.info('loaded', { model: 'm1' });
    expect(writes).toEqual([]);
    log.warn('failed', { model: 'm2' });
    expect(writes).toHaveLength(1);
    expect((writes[0] as string).trimEnd().split('\n').map((l) => (JSON.parse(l) as { level: string; model: string }).model)).toEqual(['m1', 'm2']);
  });
});
