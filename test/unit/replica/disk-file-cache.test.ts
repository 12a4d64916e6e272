import { DiskFileCache, type CachedFile } from '../../../replica/store/disk-file-cache.js';

function harness(maxBytes: number) {
  const removed: string[] = [];
  const cache = new DiskFileCache(maxBytes, (path) => removed.push(path));
  const file = (id: string, bytes: number, etag = 'e1'): CachedFile => ({ path: `/c/${id}.${etag}.onnx`, bytes, etag, checkedAt: 0 });
  /** A download admitted and its load settled, as the store does it. */
  const download = (id: string, bytes: number, etag = 'e1', ok = true): CachedFile => {
    const f = cache.admit(id, file(id, bytes, etag));
    cache.settle(id, f, ok);
    return f;
  };
  return { cache, removed, download };
}

describe('DiskFileCache', () => {
  it('keeps downloaded files for reloads and evicts the least recently used past its byte bound', () => {
    const { cache, removed, download } = harness(30);
    download('a', 10);
    download('b', 10);
    download('c', 10);
    const a = cache.checkout('a');
    expect(a?.path).toBe('/c/a.e1.onnx');
    if (a) cache.settle('a', a, true);
    download('d', 10);
    // b was used least recently (a was checked out again), so b's file goes.
    expect(removed).toEqual(['/c/b.e1.onnx']);
    expect(cache.checkout('b')).toBeUndefined();
    expect(cache.bytes).toBe(30);
  });

  it('deletes an evicted file only after the load reading it settles', () => {
    const { cache, removed, download } = harness(10);
    download('a', 10);
    const a = cache.checkout('a');
    download('b', 10);
    expect(removed).toEqual([]);
    if (a) cache.settle('a', a, true);
    expect(removed).toEqual(['/c/a.e1.onnx']);
  });

  it('sheds the files of models not loaded when the disk is full, keeping loaded ones and files being read', () => {
    const { cache, removed, download } = harness(1000);
    download('loaded', 10);
    download('evicted-a', 20);
    download('evicted-b', 30);
    download('reading', 40);
    const reading = cache.checkout('reading');
    expect(cache.shed((id) => id === 'loaded')).toBe(50);
    expect(removed.sort()).toEqual(['/c/evicted-a.e1.onnx', '/c/evicted-b.e1.onnx']);
    expect(cache.bytes).toBe(50);
    const loaded = cache.checkout('loaded');
    expect(loaded?.path).toBe('/c/loaded.e1.onnx');
    for (const [id, f] of [
      ['loaded', loaded],
      ['reading', reading],
    ] as const)
      if (f) cache.settle(id, f, true);
    expect(cache.shed(() => false)).toBe(50);
  });

  it('drops a file onnxruntime refused, so a broken model is downloaded again', () => {
    const { cache, removed, download } = harness(100);
    download('bad', 10, 'e1', false);
    expect(removed).toEqual(['/c/bad.e1.onnx']);
    expect(cache.checkout('bad')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('replaces a stale version with the new download and deletes the old file', () => {
    const { cache, removed, download } = harness(100);
    download('a', 10, 'v1');
    download('a', 12, 'v2');
    expect(removed).toEqual(['/c/a.v1.onnx']);
    expect(cache.checkout('a')?.etag).toBe('v2');
    expect(cache.bytes).toBe(12);
  });

  it('remembers when the store last confirmed a file', () => {
    const { cache, download } = harness(100);
    download('a', 10);
    const a = cache.checkout('a');
    if (!a) throw new Error('a is cached');
    cache.confirm(a, 5000);
    cache.settle('a', a, true);
    expect(cache.checkout('a')?.checkedAt).toBe(5000);
  });

  it('serves a file larger than the whole cache once and keeps nothing', () => {
    const { cache, removed } = harness(5);
    const big = cache.admit('big', { path: '/c/big.onnx', bytes: 10, etag: 'e', checkedAt: 0 });
    expect(removed).toEqual([]);
    cache.settle('big', big, true);
    expect(removed).toEqual(['/c/big.onnx']);
    expect(cache.checkout('big')).toBeUndefined();
  });

  it('with a bound of 0 keeps no file after its load', () => {
    const { cache, removed, download } = harness(0);
    download('a', 1);
    expect(removed).toEqual(['/c/a.e1.onnx']);
    expect(cache.size).toBe(0);
  });
});
