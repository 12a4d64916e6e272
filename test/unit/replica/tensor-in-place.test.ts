import { tensorFromBinary, typedArrayFromBytes, viewsInPlace } from '../../../common/tensor.js';
import { bodyPad, TENSOR_ALIGNMENT } from '../../../replica/http/body-layout.js';

/** Bytes at `offset` of a fresh buffer, holding `values` as little-endian float64. */
function float64At(offset: number, values: number[]): Uint8Array {
  const memory = new Uint8Array(offset + values.length * 8);
  const bytes = memory.subarray(offset);
  values.forEach((v, i) => new DataView(memory.buffer).setFloat64(offset + i * 8, v, true));
  return bytes;
}

describe('binary tensors in place', () => {
  it('makes a tensor at an aligned offset a view on the request bytes, not a copy', () => {
    const bytes = float64At(16, [1.5, -2]);
    const data = typedArrayFromBytes('FP64', bytes) as Float64Array;
    expect(Array.from(data)).toEqual([1.5, -2]);
    expect(data.buffer).toBe(bytes.buffer);
    expect(data.byteOffset).toBe(16);
  });

  it('copies a tensor at an offset its element size does not divide, with the same values', () => {
    for (const offset of [1, 3, 4, 7]) {
      const bytes = float64At(offset, [0.1, 1e300]);
      expect(viewsInPlace('FP64', bytes)).toBe(false);
      const data = typedArrayFromBytes('FP64', bytes) as Float64Array;
      expect(Array.from(data)).toEqual([0.1, 1e300]);
      expect(data.buffer).not.toBe(bytes.buffer);
    }
  });

  it('views one-byte datatypes at any offset', () => {
    const memory = Uint8Array.from([9, 1, 0, 1]);
    expect(viewsInPlace('UINT8', memory.subarray(1))).toBe(true);
    expect(viewsInPlace('BOOL', memory.subarray(1))).toBe(true);
    expect(viewsInPlace('INT16', memory.subarray(1))).toBe(false);
    expect(viewsInPlace('INT16', memory.subarray(2))).toBe(true);
  });

  it('copies BOOL bytes other than 0 and 1, as true', () => {
    const bytes = Uint8Array.from([2, 0, 255]);
    expect(viewsInPlace('BOOL', bytes)).toBe(false);
    const t = tensorFromBinary('BOOL', [3], bytes);
    expect(typeof t !== 'string' && Array.from(t.data as Uint8Array)).toEqual([1, 0, 1]);
    expect(Array.from(bytes)).toEqual([2, 0, 255]);
  });
});

describe('the placement of a request body', () => {
  it('puts the byte after the JSON on an 8-byte boundary, whatever the JSON length and buffer offset', () => {
    for (const byteOffset of [0, 3, 8, 13])
      for (let json = 0; json < 20; json++) {
        const pad = bodyPad(byteOffset, 100, json);
        expect(pad).toBeGreaterThanOrEqual(0);
        expect(pad).toBeLessThan(TENSOR_ALIGNMENT);
        expect((byteOffset + pad + json) % TENSOR_ALIGNMENT).toBe(0);
      }
  });

  it('does not move a body without binary data, or whose JSON length is not a length within it', () => {
    expect(bodyPad(3, 100, undefined)).toBe(0);
    expect(bodyPad(3, 100, NaN)).toBe(0);
    expect(bodyPad(3, 100, 2.5)).toBe(0);
    expect(bodyPad(3, 100, -1)).toBe(0);
    expect(bodyPad(3, 100, 101)).toBe(0);
  });
});
