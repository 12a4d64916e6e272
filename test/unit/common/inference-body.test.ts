import { ModelmuxError } from '../../../common/errors.js';
import { inferResponseBody, modelMetadataBody, parseInferBody } from '../../../common/inference-body.js';
import { concatDim0, MAX_TENSOR_RANK, splitDim0, type ModelSignature } from '../../../common/tensor.js';

const wine: ModelSignature = {
  inputs: [{ name: 'features', datatype: 'FP32', shape: [-1, 3] }],
  outputs: [{ name: 'quality', datatype: 'FP32', shape: [-1, 1] }],
};

function codeOf(f: () => unknown): { code: string; message: string } {
  try {
    f();
  } catch (e) {
    if (e instanceof ModelmuxError) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('did not throw');
}

describe('inference bodies', () => {
  it('parses a V2 request with nested or flat data into the model input order', () => {
    const flat = parseInferBody({ inputs: [{ name: 'features', shape: [2, 3], datatype: 'FP32', data: [1, 2, 3, 4, 5, 6] }] }, wine);
    const nested = parseInferBody(
      {
        inputs: [
          {
            name: 'features',
            shape: [2, 3],
            datatype: 'FP32',
            data: [
              [1, 2, 3],
              [4, 5, 6],
            ],
          },
        ],
      },
      wine,
    );
    expect(flat.rows).toBe(2);
    expect(Array.from(flat.inputs[0]!.data as Float32Array)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(nested.inputs[0]!.data).toEqual(flat.inputs[0]!.data);
    expect(flat.inputs[0]!.data).toBeInstanceOf(Float32Array);
  });

  it('accepts instances, bare rows and one bare row for single-input models', () => {
    expect(parseInferBody({ instances: [[1, 2, 3]] }, wine).inputs[0]!.dims).toEqual([1, 3]);
    expect(
      parseInferBody(
        [
          [1, 2, 3],
          [4, 5, 6],
        ],
        wine,
      ).inputs[0]!.dims,
    ).toEqual([2, 3]);
    expect(parseInferBody([1, 2, 3], wine).inputs[0]!.dims).toEqual([1, 3]);
  });

  it.each([
    [{ inputs: [{ name: 'features', shape: [1, 2], datatype: 'FP32', data: [1, 2] }] }, 'features'],
    [{ inputs: [{ name: 'features', shape: [1, 3], datatype: 'INT64', data: [1, 2, 3] }] }, 'INT64'],
    [{ inputs: [{ name: 'features', shape: [2, 3], datatype: 'FP32', data: [1, 2, 3] }] }, '3 values'],
    [{ inputs: [{ name: 'other', shape: [1, 3], datatype: 'FP32', data: [1, 2, 3] }] }, '"other"'],
    [{ inputs: [{ name: 'features', shape: [1, 3], datatype: 'FP32', data: [1, 2, 3] }], outputs: [{ name: 'nope' }] }, '"nope"'],
    [[[1, 2]], 'features'],
  ])('refuses a mismatch with input_mismatch naming it (%#)', (body, mention) => {
    const e = codeOf(() => parseInferBody(body, wine));
    expect(e.code).toBe('input_mismatch');
    expect(e.message).toContain(mention);
  });

  it.each([
    [{}],
    ['text'],
    [{ inputs: 'x' }],
    [{ instances: 3 }],
    [
      [
        [1, 2, 3],
        [1, 2],
      ],
    ],
    [{ inputs: [{ name: 'features', shape: [1, 3], datatype: 'FP32', data: [null, 1, 2] }] }],
  ])('refuses a body that is not an inference request with invalid_request (%#)', (body) => {
    expect(codeOf(() => parseInferBody(body, wine)).code).toBe('invalid_request');
  });

  it('refuses fractions and out-of-range values in integer tensors', () => {
    const ints: ModelSignature = { inputs: [{ name: 'x', datatype: 'INT8', shape: [-1] }], outputs: [] };
    expect(codeOf(() => parseInferBody({ inputs: [{ name: 'x', shape: [1], datatype: 'INT8', data: [1.5] }] }, ints)).code).toBe('input_mismatch');
    expect(codeOf(() => parseInferBody({ inputs: [{ name: 'x', shape: [1], datatype: 'INT8', data: [300] }] }, ints)).code).toBe('input_mismatch');
  });

  it('answers V2 requests in V2 and row requests with predictions', () => {
    const out = [{ name: 'quality', datatype: 'FP32' as const, dims: [2, 1], data: Float32Array.of(5.5, 6.25) }];
    const v2 = parseInferBody({ id: 'r1', inputs: [{ name: 'features', shape: [2, 3], datatype: 'FP32', data: [1, 2, 3, 4, 5, 6] }] }, wine);
    expect(inferResponseBody(v2, 'm', out).json).toEqual({ model_name: 'm', id: 'r1', outputs: [{ name: 'quality', datatype: 'FP32', shape: [2, 1], data: [5.5, 6.25] }] });
    // A version answers as the protocol names it: the model, and its version.
    expect(inferResponseBody(v2, 'm@12', out).json).toMatchObject({ model_name: 'm', model_version: '12' });
    const rows = parseInferBody(
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
      wine,
    );
    expect(inferResponseBody(rows, 'm', out).json).toEqual({ predictions: [[5.5], [6.25]] });
  });

  it('reads binary tensor data after the JSON and answers binary outputs when asked', () => {
    const bytes = new Uint8Array(Float32Array.of(1, 2, 3, 4, 5, 6).buffer);
    const req = parseInferBody({ inputs: [{ name: 'features', shape: [2, 3], datatype: 'FP32', parameters: { binary_data_size: 24 } }], parameters: { binary_data_output: true } }, wine, bytes);
    expect(Array.from(req.inputs[0]!.data as Float32Array)).toEqual([1, 2, 3, 4, 5, 6]);
    const out = [{ name: 'quality', datatype: 'FP32' as const, dims: [2, 1], data: Float32Array.of(5.5, 6.25) }];
    const res = inferResponseBody(req, 'm', out);
    expect(res.json).toMatchObject({ outputs: [{ name: 'quality', shape: [2, 1], parameters: { binary_data_size: 8 } }] });
    expect(Array.from(new Float32Array(Uint8Array.from(Buffer.concat(res.binary ?? [])).buffer))).toEqual([5.5, 6.25]);
  });

  it('refuses binary data whose size does not match the shape or that no input declares', () => {
    const body = (size: number) => ({ inputs: [{ name: 'features', shape: [1, 3], datatype: 'FP32', parameters: { binary_data_size: size } }] });
    expect(codeOf(() => parseInferBody(body(8), wine, new Uint8Array(8))).code).toBe('input_mismatch');
    expect(codeOf(() => parseInferBody(body(12), wine, new Uint8Array(8))).code).toBe('invalid_request');
    expect(codeOf(() => parseInferBody(body(12), wine, new Uint8Array(16))).code).toBe('invalid_request');
  });

  it('describes the model metadata from its signature', () => {
    expect(modelMetadataBody('m', wine, ['1', '2'])).toMatchObject({ name: 'm', versions: ['1', '2'], inputs: [{ name: 'features', datatype: 'FP32', shape: [-1, 3] }] });
    expect(modelMetadataBody('m@2', wine, ['2'])).toMatchObject({ name: 'm', versions: ['2'] });
    // The store could not be listed: no versions field rather than a wrong one.
    expect(modelMetadataBody('m', wine, undefined)).not.toHaveProperty('versions');
  });
});

/** `depth` arrays, one inside the other, around `inner`. */
function nestedArrays(depth: number, inner: unknown[] = []): unknown[] {
  let v = inner;
  for (let i = 1; i < depth; i++) v = [v];
  return v;
}

/**
 * Every array in `v`, each wrapped in a proxy that counts reads of its elements into `reads`
 * (Array.isArray still sees an array): work counted, not timed.
 */
function counted(v: unknown, reads: { n: number }): unknown {
  if (!Array.isArray(v)) return v;
  const items = v.map((x) => counted(x, reads));
  return new Proxy(items, {
    get(target, key, receiver) {
      if (typeof key === 'string' && /^\d+$/.test(key)) reads.n++;
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
}

describe('nesting in inference bodies', () => {
  const deepModel = (rank: number): ModelSignature => ({ inputs: [{ name: 'x', datatype: 'FP32', shape: Array.from({ length: rank }, () => -1) }], outputs: [] });

  it('reads rows 16 arrays deep a bounded number of times per array', () => {
    // The 61-byte bomb {"instances":[[[…[]…]]]} took time doubling with each level: 16 levels
    // were 65,534 reads, 30 levels froze a replica.
    const reads = { n: 0 };
    const body = { instances: counted(nestedArrays(16), reads) };
    expect(codeOf(() => parseInferBody(body, wine)).code).toBe('input_mismatch');
    expect(reads.n).toBeLessThanOrEqual(2 * 16);
  });

  it('reads each value of wide rows a bounded number of times', () => {
    const reads = { n: 0 };
    const rows = Array.from({ length: 50 }, (_, r) => [r, r + 1, r + 2]);
    const parsed = parseInferBody({ instances: counted(rows, reads) }, wine);
    expect(parsed.inputs[0]!.dims).toEqual([50, 3]);
    // 50 rows + 150 values, each read once by the walk and once more on the way down the first row.
    expect(reads.n).toBeLessThanOrEqual(2 * (50 + 150));
  });

  it(`accepts rows and V2 data of the highest rank, ${MAX_TENSOR_RANK}`, () => {
    const sig = deepModel(MAX_TENSOR_RANK);
    expect(parseInferBody({ instances: nestedArrays(MAX_TENSOR_RANK, [7]) }, sig).inputs[0]!.dims).toEqual(Array.from({ length: MAX_TENSOR_RANK }, () => 1));
    const shape = Array.from({ length: MAX_TENSOR_RANK }, () => 1);
    expect(Array.from(parseInferBody({ inputs: [{ name: 'x', shape, datatype: 'FP32', data: nestedArrays(MAX_TENSOR_RANK, [7]) }] }, sig).inputs[0]!.data as Float32Array)).toEqual([7]);
  });

  it.each([
    ['instances', (depth: number): unknown => ({ instances: nestedArrays(depth) })],
    ['bare rows', (depth: number): unknown => nestedArrays(depth)],
    ['V2 data', (depth: number): unknown => ({ inputs: [{ name: 'features', shape: [1, 3], datatype: 'FP32', data: nestedArrays(depth) }] })],
  ])(`refuses %s one array past ${MAX_TENSOR_RANK} deep, and 10,000 deep, with invalid_request naming the limit`, (_form, body) => {
    for (const depth of [MAX_TENSOR_RANK + 1, 10_000]) {
      const e = codeOf(() => parseInferBody(body(depth), wine));
      expect(e.code).toBe('invalid_request');
      expect(e.message).toContain(`more than ${MAX_TENSOR_RANK} deep`);
    }
  });

  it(`refuses a V2 shape of more than ${MAX_TENSOR_RANK} dimensions with invalid_request`, () => {
    const shape = Array.from({ length: MAX_TENSOR_RANK + 1 }, () => 1);
    expect(codeOf(() => parseInferBody({ inputs: [{ name: 'x', shape, datatype: 'FP32', data: [1] }] }, deepModel(MAX_TENSOR_RANK + 1))).code).toBe('invalid_request');
  });

  it('still tells ragged rows from rows nested deeper in a later row', () => {
    expect(
      codeOf(() =>
        parseInferBody(
          [
            [1, 2, 3],
            [1, 2, [3]],
          ],
          wine,
        ),
      ).message,
    ).toContain('ragged');
    expect(codeOf(() => parseInferBody([[], [1]], wine)).message).toContain('ragged');
    expect(codeOf(() => parseInferBody([[1, 2, 3], nestedArrays(10_000)], wine)).message).toContain('ragged');
  });
});

describe('tensor batching helpers', () => {
  it('concatenates on dim 0 and splits each request its own rows back', () => {
    const a = { datatype: 'FP32' as const, dims: [1, 2], data: Float32Array.of(1, 2) };
    const b = { datatype: 'FP32' as const, dims: [2, 2], data: Float32Array.of(3, 4, 5, 6) };
    const both = concatDim0([a, b]);
    expect(both.dims).toEqual([3, 2]);
    expect(Array.from(both.data as Float32Array)).toEqual([1, 2, 3, 4, 5, 6]);
    const [x, y] = splitDim0(both, [1, 2]);
    expect(Array.from(x!.data as Float32Array)).toEqual([1, 2]);
    expect(y!.dims).toEqual([2, 2]);
    expect(Array.from(y!.data as Float32Array)).toEqual([3, 4, 5, 6]);
    expect(() => splitDim0(both, [1, 1])).toThrow();
  });
});
