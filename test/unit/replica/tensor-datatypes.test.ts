import { parseJsonBody } from '../../../common/json-body.js';
import { fromBfloat16Bits, jsonFloat, stringsFromBytes, tensorBytes, toBfloat16Bits, toJsonValues, typedArrayFrom } from '../../../common/tensor.js';

describe('64-bit integers in JSON', () => {
  it('parses integers past 2^53 exactly, as bigints, and leaves the rest numbers', () => {
    const body = parseJsonBody(Buffer.from('{"data":[9223372036854775807,-9007199254740993,12,0.1234567890123456789,1e300]}')) as { data: unknown[] };
    expect(body.data).toEqual([9223372036854775807n, -9007199254740993n, 12, Number('0.1234567890123456789'), 1e300]);
  });

  it('builds INT64 and UINT64 tensors over their whole range and refuses past it', () => {
    expect(typedArrayFrom('INT64', [-9223372036854775808n, 9223372036854775807n, 3])).toEqual(BigInt64Array.from([-9223372036854775808n, 9223372036854775807n, 3n]));
    expect(typedArrayFrom('UINT64', [18446744073709551615n])).toEqual(BigUint64Array.from([18446744073709551615n]));
    expect(typedArrayFrom('UINT64', [18446744073709551616n])).toMatch(/out of the range of UINT64/);
    expect(typedArrayFrom('INT32', [2147483648])).toMatch(/out of the range of INT32/);
    expect(typedArrayFrom('INT8', [1.5])).toMatch(/not a INT8 integer/);
  });

  it('writes 64-bit integers exactly: numbers while safe, raw JSON numbers past 2^53', () => {
    const data = BigInt64Array.from([-9223372036854775808n, 5n]);
    expect(JSON.stringify(toJsonValues({ datatype: 'INT64', dims: [2], data }))).toBe('[-9223372036854775808,5]');
    expect(JSON.stringify(toJsonValues({ datatype: 'UINT64', dims: [1], data: BigUint64Array.from([18446744073709551615n]) }))).toBe('[18446744073709551615]');
  });
});

describe('non-finite floats', () => {
  it('are written as "inf", "-inf" and "nan" and read back from them', () => {
    expect([Infinity, -Infinity, NaN, 2].map(jsonFloat)).toEqual(['inf', '-inf', 'nan', 2]);
    const read = typedArrayFrom('FP32', ['inf', '-inf', 'nan', 'Infinity', 'NaN', 1]);
    expect(Array.from(read as Float32Array)).toEqual([Infinity, -Infinity, NaN, Infinity, NaN, 1]);
    expect(typedArrayFrom('FP32', ['infinite'])).toMatch(/the string "infinite", not a number/);
    expect(typedArrayFrom('INT32', ['inf'])).toMatch(/not a number/);
  });
});

describe('FP16 and BF16', () => {
  it('hold FP16 as IEEE half bit patterns', () => {
    const bits = typedArrayFrom('FP16', [1, -2, 65504, 'inf', 1e6]) as Uint16Array;
    expect(Array.from(bits)).toEqual([0x3c00, 0xc000, 0x7bff, 0x7c00, 0x7c00]);
    expect(toJsonValues({ datatype: 'FP16', dims: [5], data: bits })).toEqual([1, -2, 65504, 'inf', 'inf']);
  });

  it('round float32 to the nearest bfloat16, ties to even', () => {
    expect(toBfloat16Bits(1)).toBe(0x3f80);
    expect(fromBfloat16Bits(toBfloat16Bits(1 + 2 ** -8))).toBe(1); // a tie: to even
    expect(fromBfloat16Bits(toBfloat16Bits(1 + 3 * 2 ** -8))).toBe(1 + 2 ** -6);
    expect(Number.isNaN(fromBfloat16Bits(toBfloat16Bits(NaN)))).toBe(true);
    expect(toJsonValues({ datatype: 'BF16', dims: [2], data: typedArrayFrom('BF16', [-Infinity, 3]) as Uint16Array })).toEqual(['-inf', 3]);
  });
});

describe('BYTES', () => {
  it('round-trips strings through the length-prefixed binary layout', () => {
    const t = { datatype: 'BYTES' as const, dims: [3], data: ['a', 'héllo', ''] };
    const bytes = tensorBytes(t);
    expect(bytes.length).toBe(4 * 3 + 1 + 6);
    expect(stringsFromBytes(bytes, 3)).toEqual(t.data);
  });

  it('says what is wrong with malformed binary BYTES', () => {
    const bytes = tensorBytes({ datatype: 'BYTES', dims: [1], data: ['abc'] });
    expect(stringsFromBytes(bytes.subarray(0, 5), 1)).toMatch(/element 0 \(3 bytes\) runs past the end/);
    expect(stringsFromBytes(bytes, 2)).toMatch(/element 1 starts past the end/);
    expect(stringsFromBytes(bytes, 0)).toMatch(/7 bytes past its 0 BYTES elements/);
    expect(typedArrayFrom('BYTES', ['a', 1])).toMatch(/element 1 is number, not a string/);
  });
});
