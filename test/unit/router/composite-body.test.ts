import { ModelmuxError } from '../../../common/errors.js';
import { inferenceServiceDefinition, type ModelInferResponse } from '../../../common/grpc/inference-service.js';
import { errorOfAnswer, parseCompositeRequest, parseInferAnswer, stringify, writeAnswer, type WrittenAnswer } from '../../../router/composite/composite-body.js';
import { parseJsonBody } from '../../../common/json-body.js';
import { encodeRequest } from '../../helpers/grpc-messages.js';
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
const HTTP = { kind: 'http', inferenceHeaderLength: undefined } as const;
const GRPC = { kind: 'grpc' } as const;
const infer = inferenceServiceDefinition()['ModelInfer'] as { responseDeserialize(b: Buffer): unknown };

/** A binary extension body: the JSON, then `parts`; and its inference-header-content-length. */
function binaryBody(json: unknown, parts: Uint8Array[]): [Buffer, string] {
  const head = body(json);
  return [Buffer.concat([head, ...parts]), String(head.length)];
}

const u8 = (a: ArrayBufferView): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** BYTES elements as the extension lays them out: a 4-byte little-endian length, then the bytes. */
function bytesElements(strings: string[]): Uint8Array {
  return Buffer.concat(
    strings.map((s) => {
      const b = Buffer.from(s);
      const len = Buffer.alloc(4);
      len.writeUInt32LE(b.length);
      return Buffer.concat([len, b]);
    }),
  );
}

describe('composite bodies', () => {
  const input = { name: 'x', shape: [1, 3], datatype: 'FP32', data: [[1, 2, 3]] };

  it('takes a V2 JSON request, which members may be sent as it came', () => {
    expect(parseCompositeRequest(body({ id: 'r', inputs: [input] }), HTTP)).toEqual({
      request: { id: 'r', inputs: [input] },
      answer: { kind: 'http', binaryDefault: false, binaryByName: new Map() },
      plain: true,
    });
  });

  it('refuses the row forms, a body without data, and binary data that does not fit its inputs (400)', () => {
    expect(codeOf(() => parseCompositeRequest(body({ instances: [[1, 2, 3]] }), HTTP))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(body([[1, 2, 3]]), HTTP))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(Buffer.from('{"inputs":'), HTTP))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(Buffer.from(`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":${'['.repeat(60)}${']'.repeat(60)}}]}`), HTTP))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(body({ inputs: [{ ...input, data: undefined }] }), HTTP))).toBe('invalid_request');
    expect(codeOf(() => parseCompositeRequest(body({ inputs: [input] }), { kind: 'http', inferenceHeaderLength: '4000' }))).toBe('invalid_request');
    const [short, length] = binaryBody({ inputs: [{ name: 'x', shape: [3], datatype: 'FP32', parameters: { binary_data_size: 12 } }] }, [new Uint8Array(8)]);
    expect(codeOf(() => parseCompositeRequest(short, { kind: 'http', inferenceHeaderLength: length }))).toBe('invalid_request');
  });

  it('reads binary inputs of every datatype as the values JSON would give, and writes them back as the same bytes', () => {
    const half = new Uint16Array([0x3c00, 0x8001, 0x7bff, 0xfc00]);
    const tensors = [
      { name: 'f16', datatype: 'FP16', shape: [4], bytes: u8(half) },
      { name: 'bf16', datatype: 'BF16', shape: [2], bytes: u8(new Uint16Array([0x3f81, 0xff80])) },
      { name: 'f32', datatype: 'FP32', shape: [2], bytes: u8(new Float32Array([0.1, Number.NaN])) },
      { name: 'f64', datatype: 'FP64', shape: [1], bytes: u8(new Float64Array([1 / 3])) },
      { name: 'i64', datatype: 'INT64', shape: [2], bytes: u8(new BigInt64Array([-(2n ** 62n) - 1n, 7n])) },
      { name: 'u64', datatype: 'UINT64', shape: [1], bytes: u8(new BigUint64Array([2n ** 64n - 1n])) },
      { name: 'u8', datatype: 'UINT8', shape: [2], bytes: new Uint8Array([0, 255]) },
      { name: 'b', datatype: 'BOOL', shape: [2], bytes: new Uint8Array([1, 0]) },
      { name: 's', datatype: 'BYTES', shape: [2], bytes: bytesElements(['é', '']) },
    ];
    const [whole, length] = binaryBody(
      {
        inputs: tensors.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.bytes.length } })),
        outputs: [{ name: 'f16', parameters: { binary_data: false } }],
        parameters: { binary_data_output: true },
      },
      tensors.map((t) => t.bytes),
    );
    const read = parseCompositeRequest(whole, { kind: 'http', inferenceHeaderLength: length });
    expect(read.plain).toBe(false);
    // Members are sent JSON: no parameter of the extension is left.
    expect(stringify(read.request)).not.toMatch(/binary_data/);
    expect(read.request.inputs.find((i) => i.name === 'f16')?.data).toEqual([1, -(2 ** -24), 65504, '-inf']);
    const outputs = read.request.inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: i.shape, data: parseJsonBody(Buffer.from(stringify(i.data))) as unknown[] }));
    const written = writeAnswer(read.answer, 'all', undefined, outputs, ['m']);
    const head = JSON.parse(new TextDecoder().decode(written.bytes.subarray(0, written.headerLength))) as { outputs: { name: string; data?: unknown[]; parameters?: { binary_data_size: number } }[] };
    // f16 was asked as JSON by name; every other output as binary data, by binary_data_output.
    expect(head.outputs[0]).toEqual({ name: 'f16', datatype: 'FP16', shape: [4], data: [1, -(2 ** -24), 65504, '-inf'] });
    let at = written.headerLength as number;
    for (const t of tensors.slice(1)) {
      const size = head.outputs.find((o) => o.name === t.name)?.parameters?.binary_data_size ?? -1;
      expect([t.name, Buffer.from(written.bytes.subarray(at, at + size))]).toEqual([t.name, Buffer.from(t.bytes)]);
      at += size;
    }
    expect(at).toBe(written.bytes.length);
  });

  it('reads a gRPC call of typed or raw contents, and answers raw to raw and typed to typed', () => {
    const raw = u8(new BigInt64Array([2n ** 60n + 1n, -3n]));
    const call = (contents: object): Buffer =>
      encodeRequest('ModelInfer', {
        model_name: 'e',
        id: 'c',
        inputs: [{ name: 'x', datatype: 'INT64', shape: [2], ...contents }],
        ...('raw' in contents ? { raw_input_contents: [raw], inputs: [{ name: 'x', datatype: 'INT64', shape: [2] }] } : {}),
      });
    const typed = parseCompositeRequest(call({ contents: { int64_contents: [String(2n ** 60n + 1n), '-3'] } }), GRPC);
    const rawRead = parseCompositeRequest(call({ raw: true }), GRPC);
    expect(stringify(typed.request)).toBe(stringify(rawRead.request));
    expect(stringify(typed.request.inputs[0]?.data)).toBe('[1152921504606846977,-3]');
    expect([typed.answer, rawRead.answer]).toEqual([
      { kind: 'grpc', raw: false },
      { kind: 'grpc', raw: true },
    ]);
    const outputs = [{ name: 'y', datatype: 'INT64', shape: [2], data: [2n ** 60n + 1n, -3] }];
    const decode = (w: WrittenAnswer): ModelInferResponse => infer.responseDeserialize(Buffer.from(w.bytes)) as ModelInferResponse;
    const typedAnswer = decode(writeAnswer(typed.answer, 'e', 'c', outputs, ['a', 'b']));
    expect(typedAnswer).toMatchObject({ model_name: 'e', id: 'c', raw_output_contents: [], parameters: { members: { string_param: 'a,b' } } });
    expect(typedAnswer.outputs[0]?.contents?.int64_contents).toEqual(['1152921504606846977', '-3']);
    const rawAnswer = decode(writeAnswer(rawRead.answer, 'e', 'c', outputs, ['a', 'b']));
    expect(Buffer.from(rawAnswer.raw_output_contents[0] ?? [])).toEqual(Buffer.from(raw));
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
