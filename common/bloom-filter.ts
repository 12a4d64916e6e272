/**
 * A Bloom filter over strings: `has` never answers false for an added string, and answers true
 * for one never added with about the rate it was sized for. It is the membership part of a
 * replica's compact table annotation (common/table-annotation.ts), so the replica and every
 * router must hash alike: the hashes below are part of that contract and never change.
 */

// Module bindings, not lookups on the global object: in a vm context (jest) every global read
// goes through an interceptor, which made hashing thirty times slower.
const imul = Math.imul;

/** Two 32-bit hashes of `s` in one pass (murmur3's mixing over UTF-16 code units; model ids are ASCII). */
function hashPair(s: string): [number, number] {
  let h1 = 0x9747b28c;
  let h2 = 0x2f3a61d5;
  for (let i = 0; i < s.length; i++) {
    let k = imul(s.charCodeAt(i), 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = imul(k, 0x1b873593);
    h1 ^= k;
    h1 = (h1 << 13) | (h1 >>> 19);
    h1 = (imul(h1, 5) + 0xe6546b64) | 0;
    h2 ^= imul(k, 0x85ebca6b) ^ (k >>> 13);
    h2 = (h2 << 17) | (h2 >>> 15);
    h2 = (imul(h2, 9) + 0x5bd1e995) | 0;
  }
  return [fmix(h1 ^ s.length), fmix(h2 ^ imul(s.length, 0x27d4eb2f))];
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Bits per entry and hash count for a false-positive rate: m/n = -ln p / ln²2, k = m/n · ln 2. */
export function bloomShape(entries: number, falsePositiveRate: number, maxBits: number): { bits: number; hashes: number } {
  const perEntry = -Math.log(falsePositiveRate) / (Math.LN2 * Math.LN2);
  // Whole bytes, at least 64 bits: an empty table still encodes a valid filter.
  const bits = Math.min(maxBits, Math.max(64, Math.ceil((entries * perEntry) / 8) * 8));
  const hashes = entries === 0 ? 1 : Math.max(1, Math.min(MAX_HASHES, Math.round((bits / entries) * Math.LN2)));
  return { bits, hashes };
}

/** More hash functions than this only help filters far emptier than any we build. */
export const MAX_HASHES = 24;

export class BloomFilter {
  private constructor(
    /** A multiple of 8. */
    readonly bits: number,
    readonly hashes: number,
    private readonly data: Uint8Array,
  ) {}

  static empty(bits: number, hashes: number): BloomFilter {
    if (!Number.isInteger(bits) || bits < 8 || bits % 8 !== 0) throw new RangeError(`a Bloom filter needs a positive multiple of 8 bits, not ${bits}`);
    if (!Number.isInteger(hashes) || hashes < 1 || hashes > MAX_HASHES) throw new RangeError(`a Bloom filter needs 1–${MAX_HASHES} hashes, not ${hashes}`);
    return new BloomFilter(bits, hashes, new Uint8Array(bits / 8));
  }

  /** The filter of a published annotation; undefined when the data does not fit the shape. */
  static fromBase64(bits: number, hashes: number, base64: string): BloomFilter | undefined {
    if (!Number.isInteger(bits) || bits < 8 || bits % 8 !== 0 || !Number.isInteger(hashes) || hashes < 1 || hashes > MAX_HASHES) return undefined;
    if (base64.length !== Math.ceil(bits / 8 / 3) * 4 || !/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) return undefined;
    const data = new Uint8Array(Buffer.from(base64, 'base64'));
    return data.length === bits / 8 ? new BloomFilter(bits, hashes, data) : undefined;
  }

  add(s: string): void {
    const [a, b] = hashPair(s);
    // Kirsch–Mitzenmacher: k indexes from two hashes, as good as k independent ones.
    for (let i = 0; i < this.hashes; i++) {
      const at = ((a + imul(i, b)) >>> 0) % this.bits;
      this.data[at >>> 3] = (this.data[at >>> 3] ?? 0) | (1 << (at & 7));
    }
  }

  has(s: string): boolean {
    const [a, b] = hashPair(s);
    for (let i = 0; i < this.hashes; i++) {
      const at = ((a + imul(i, b)) >>> 0) % this.bits;
      if (((this.data[at >>> 3] ?? 0) & (1 << (at & 7))) === 0) return false;
    }
    return true;
  }

  toBase64(): string {
    return Buffer.from(this.data.buffer, this.data.byteOffset, this.data.byteLength).toString('base64');
  }
}
