import { releaseRead } from '../../../common/read-release.js';

describe('releaseRead', () => {
  it('frees a chunk that is its whole ArrayBuffer: the chunk reads as empty from then on', () => {
    const chunk = Buffer.from(new ArrayBuffer(65_536));
    releaseRead(chunk);
    expect(chunk.buffer.byteLength).toBe(0);
    expect(chunk.length).toBe(0);
  });

  it('leaves a view that shares its memory with other bytes untouched, at the start or further in', () => {
    const read = Buffer.alloc(65_536, 7);
    const head = read.subarray(0, 1000);
    const body = read.subarray(1000);
    releaseRead(head);
    releaseRead(body);
    expect(read.length).toBe(65_536);
    expect(body.every((b) => b === 7)).toBe(true);
  });

  it('leaves a small buffer from Buffer’s shared slab untouched, and the slab’s other buffers with it', () => {
    const a = Buffer.allocUnsafe(100).fill(1);
    const b = Buffer.allocUnsafe(100).fill(2);
    releaseRead(a);
    expect(a.length).toBe(100);
    expect(b.every((x) => x === 2)).toBe(true);
  });

  it('takes a chunk already freed, or empty, without a throw', () => {
    const chunk = Buffer.from(new ArrayBuffer(16));
    releaseRead(chunk);
    expect(() => releaseRead(chunk)).not.toThrow();
    expect(() => releaseRead(Buffer.alloc(0))).not.toThrow();
  });
});
