import { BloomFilter, bloomShape } from '../../common/bloom-filter.js';
import type { ModelId } from '../../common/model-id.js';
import { parseModelTable, type ModelTable } from '../../common/model-table.js';
import {
  encodeTableAnnotation,
  FILTER_FALSE_POSITIVE_RATE,
  FULL_TABLE_MAX_BYTES,
  MAX_FILTER_BYTES,
  parseTableAnnotation,
  TABLE_ANNOTATION_MAX_BYTES,
  tableDigest,
} from '../../common/table-annotation.js';

/** An id of exactly `length` characters, distinct for each (prefix, i). */
const longId = (prefix: string, i: number, length = 200): ModelId => {
  const head = `${prefix}-${i}-`;
  return (head + 'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(8)).slice(0, length) as ModelId;
};

const table = (loaded: readonly string[], loading: readonly string[] = [], version = 1): ModelTable => ({
  version,
  loaded: loaded as ModelId[],
  loading: loading as ModelId[],
  capacity: 10_000,
  bytes: 123_456,
});

describe('the table annotation', () => {
  it('is the table itself while small, read the same by the old parser', () => {
    const t = table(['a', 'b'], ['c'], 7);
    const raw = encodeTableAnnotation(t);
    expect(parseTableAnnotation(raw)).toEqual({ form: 'full', table: t });
    expect(parseModelTable(raw)).toEqual(t);
  });

  it('turns compact exactly past its threshold', () => {
    // Each 40-character id costs 43 bytes of JSON: find the count just under and just over.
    const ids = Array.from({ length: 400 }, (_, i) => longId('w', i, 40));
    let n = 1;
    while (JSON.stringify(table(ids.slice(0, n + 1))).length <= FULL_TABLE_MAX_BYTES) n++;
    expect(parseTableAnnotation(encodeTableAnnotation(table(ids.slice(0, n))))?.form).toBe('full');
    const over = parseTableAnnotation(encodeTableAnnotation(table(ids.slice(0, n + 1))));
    expect(over?.form).toBe('compact');
    expect(n).toBeGreaterThan(150);
  });

  it('stays under 64 KiB at 10,000 loaded and 64 loading ids of 200 characters, and round-trips', () => {
    const loaded = Array.from({ length: 10_000 }, (_, i) => longId('model', i));
    const loading = Array.from({ length: 64 }, (_, i) => longId('loading', i));
    const t = table(loaded, loading, 123_456);
    const raw = encodeTableAnnotation(t);
    expect(TABLE_ANNOTATION_MAX_BYTES).toBe(64 * 1024);
    expect(Buffer.byteLength(raw)).toBeLessThanOrEqual(TABLE_ANNOTATION_MAX_BYTES);
    // The full list would be 2 MB: eight times the API server's limit for all annotations.
    expect(JSON.stringify(t).length).toBeGreaterThan(2_000_000);

    const parsed = parseTableAnnotation(raw);
    if (parsed?.form !== 'compact') throw new Error(`expected the compact form, got ${parsed?.form}`);
    const s = parsed.summary;
    expect({ version: s.version, capacity: s.capacity, bytes: s.bytes, loadedCount: s.loadedCount, loadingCount: s.loadingCount }).toEqual({
      version: 123_456,
      capacity: 10_000,
      bytes: 123_456,
      loadedCount: 10_000,
      loadingCount: 64,
    });
    expect(s.digest).toBe(tableDigest(t));
    // No false negative: every held id reads as held.
    expect([...loaded, ...loading].filter((id) => !s.filter.has(id))).toEqual([]);

    // False positives, measured over 200,000 ids of the same shape never added.
    const probes = 200_000;
    let fp = 0;
    for (let i = 0; i < probes; i++) if (s.filter.has(longId('absent', i))) fp++;
    const rate = fp / probes;
    // Sized for 1 in 1,000; 200,000 draws put 3 standard deviations at ±0.00021.
    expect(rate).toBeLessThan(FILTER_FALSE_POSITIVE_RATE * 1.25);
    expect(rate).toBeGreaterThan(FILTER_FALSE_POSITIVE_RATE * 0.75);
  });

  it('digests the loaded and loading sets, whatever their order', () => {
    const t = table(['a', 'b', 'c'], ['d']);
    expect(tableDigest(table(['c', 'a', 'b'], ['d']))).toBe(tableDigest(t));
    expect(tableDigest(table(['a', 'b', 'c', 'd']))).not.toBe(tableDigest(t));
    expect(tableDigest(table(['a', 'b'], ['c', 'd']))).not.toBe(tableDigest(t));
    expect(tableDigest(table(['a', 'b', 'c'], []))).not.toBe(tableDigest(t));
  });

  it('refuses compact annotations whose filter does not fit its shape, and oversized values', () => {
    const big = Array.from({ length: 1000 }, (_, i) => longId('m', i, 60));
    const good = JSON.parse(encodeTableAnnotation(table(big))) as { filter: { bits: number; hashes: number; data: string } };
    const variants = [
      { ...good, filter: { ...good.filter, bits: good.filter.bits + 8 } },
      { ...good, filter: { ...good.filter, bits: good.filter.bits - 3 } },
      { ...good, filter: { ...good.filter, hashes: 0 } },
      { ...good, filter: { ...good.filter, data: good.filter.data.slice(4) } },
      { ...good, filter: { ...good.filter, data: '!' + good.filter.data.slice(1) } },
      { ...good, digest: 'not-hex' },
      { ...good, loadedCount: -1 },
    ];
    expect(parseTableAnnotation(JSON.stringify(good))?.form).toBe('compact');
    for (const v of variants) expect(parseTableAnnotation(JSON.stringify(v))).toBeUndefined();
    expect(parseTableAnnotation('x'.repeat(TABLE_ANNOTATION_MAX_BYTES + 1))).toBeUndefined();
    for (const g of ['{', 'null', '[]', '{"digest":1}']) expect(parseTableAnnotation(g)).toBeUndefined();
  });

  it('caps the filter, so even an unbounded set stays under the bound', () => {
    const { bits } = bloomShape(1_000_000, FILTER_FALSE_POSITIVE_RATE, MAX_FILTER_BYTES * 8);
    expect(bits).toBe(MAX_FILTER_BYTES * 8);
    const f = BloomFilter.empty(bits, 10);
    expect(Math.ceil(bits / 8 / 3) * 4 + 400).toBeLessThan(TABLE_ANNOTATION_MAX_BYTES);
    expect(BloomFilter.fromBase64(bits, 10, f.toBase64())?.has('x')).toBe(false);
  });
});
