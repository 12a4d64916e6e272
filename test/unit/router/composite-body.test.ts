import { ModelmuxError } from '../../../common/errors.js';
import { errorOfAnswer, parseCompositeRequest, parseInferAnswer, stringify } from '../../../router/composite/composite-body.js';
import { parseModelMetadata } from '../../../router/composite/composite-metadata.js';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return err instanceof ModelmuxError ? err.code : `plain: ${(err as Error).message}`;
  }
  return 'none';
}

const body = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

describe('composite bodies', () => {
  const input = { name: 'x', shape: [1, 3], datatype: 'FP32', data: [[1, 2, 3]] };

  it('takes a V2 JSON request', () => {
    expect(parseCompositeRequest(body({ id: 'r', inputs: [input] }), undefined)).toEqual({ id: 'r', inputs: [input] });
  });

  it('refuses the binary extension (415) and the row forms (400)', () => {
    expect(codeOf(() => parseCompositeRequest(body({ inputs: [input] }), '40'))).toBe('composite_binary_unsupported');
    expect(codeOf(() => parseCompositeRequest(body({ inputs: [{ ...input, data: undefined, parameters: { binary_data_size: 12 } }] }), undefined))).toBe('composite_binary_unsupported');
    expect(codeOf(() => parseCompositeRequest(body({ inputs: [input], parameters: { binary_data_output: true } }), undefined))).toBe('composite_binary_unsupported');
    expect(codeOf(() => parseCompositeRequest(body({ inputs: [input], outputs: [{ name: 'y', parameters: { binary_data: true } }] }), undefined))).toBe('composite_binary_unsupported');
    expect(codeOf(() => parseCompositeRequest(body({ instances: [[1, 2, 3]] }), undefined))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(body([[1, 2, 3]]), undefined))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(Buffer.from('{"inputs":'), undefined))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(Buffer.from(`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":${'['.repeat(60)}${']'.repeat(60)}}]}`), undefined))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(body({ inputs: [{ ...input, data: undefined }] }), undefined))).toBe('invalid_request');
  });

  it('reads answers with data flat or nested, and metadata inputs', () => {
    expect(
      parseInferAnswer(
        body({
          model_name: 'm',
          outputs: [
            {
              name: 'y',
              datatype: 'FP32',
              shape: [2, 2],
              data: [
                [1, 2],
                [3, 4],
              ],
            },
          ],
        }),
      ),
    ).toEqual([{ name: 'y', datatype: 'FP32', shape: [2, 2], data: [1, 2, 3, 4] }]);
    expect(codeOf(() => parseInferAnswer(body({ predictions: [1] })))).toMatch(/^plain: the answer is not an Open Inference Protocol answer/);
    expect(parseModelMetadata(body({ name: 'm', platform: 'onnxruntime_onnx', inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }], outputs: [] }))).toEqual({
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }],
      outputs: [],
    });
    expect(() => parseModelMetadata(body({ name: 'm' }))).toThrow(/^the model metadata is not an Open Inference Protocol model metadata \(inputs: /);
  });

  it('reads error answers by their code', () => {
    expect(errorOfAnswer(404, body({ error: 'model_not_found', message: 'no model "q"' }))).toEqual({ code: 'model_not_found', message: 'no model "q"' });
    expect(errorOfAnswer(500, Buffer.from('oops'))).toEqual({ code: 'upstream_unavailable', message: 'answered 500 without a modelmux error body' });
  });

  it('writes bigints exactly', () => {
    expect(stringify({ data: [2n ** 60n, 1] })).toBe('{"data":[1152921504606846976,1]}');
  });
});
