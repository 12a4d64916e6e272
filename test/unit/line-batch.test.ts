import { createLogger } from '../../common/log.js';
import { LineBatch } from '../../common/line-batch.js';

describe('LineBatch', () => {
  it('gathers lines into one write until the flush', () => {
    const writes: string[] = [];
    const batch = new LineBatch((b) => void writes.push(b.toString()), 60_000);
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
    const batch = new LineBatch((b) => void writes.push(b.toString()), 60_000);
    batch.add('first', false);
    batch.add('urgent', true);
    expect(writes).toEqual(['first\nurgent\n']);
  });

  it('writes once the buffer is full, and within the flush interval without being asked', async () => {
    const writes: string[] = [];
    const batch = new LineBatch((b) => void writes.push(b.toString()), 5, 10);
    batch.add('0123456789', false);
    expect(writes).toEqual(['0123456789\n']);
    batch.add('late', false);
    await new Promise((r) => setTimeout(r, 50));
    expect(writes).toEqual(['0123456789\n', 'late\n']);
  });

  it('keeps every byte and the order across buffer boundaries, multi-byte characters included', () => {
    const writes: Buffer[] = [];
    const batch = new LineBatch((b) => void writes.push(b), 60_000, 64);
    const lines = Array.from({ length: 50 }, (_, i) => `line ${i} ${'é€😀'.repeat(i % 7)}${i === 30 ? 'x'.repeat(100) : ''}`);
    for (const l of lines) batch.add(l, false);
    batch.flush();
    expect(writes.length).toBeGreaterThan(5);
    expect(writes.every((b) => b.length <= 130)).toBe(true);
    expect(Buffer.concat(writes).toString('utf8')).toBe(lines.map((l) => `${l}\n`).join(''));
  });

  it('takes a logger: info lines wait, warnings and errors go out at once', () => {
    const writes: string[] = [];
    const batch = new LineBatch((b) => void writes.push(b.toString()), 60_000);
    const log = createLogger({ component: 'replica' }, batch.add);
    log.info('loaded', { model: 'm1' });
    expect(writes).toEqual([]);
    log.warn('failed', { model: 'm2' });
    expect(writes).toHaveLength(1);
    expect(
      (writes[0] as string)
        .trimEnd()
        .split('\n')
        .map((l) => (JSON.parse(l) as { level: string; model: string }).model),
    ).toEqual(['m1', 'm2']);
  });
});
