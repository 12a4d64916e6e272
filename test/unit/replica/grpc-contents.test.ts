import { expect } from '@jest/globals';
import {
  encodeResponse,
  inferenceServiceDefinition,
  type InferTensorContents,
  type ModelInferAnswer,
  type ModelInferRequest,
  type ModelInferResponse,
} from '../../../common/grpc/inference-service.js';
import { grpcInferBody } from '../../../common/grpc/grpc-request.js';
import { grpcInferResponse, grpcModelMetadata } from '../../../common/grpc/grpc-response.js';
import { inferResponseBody, parseInferBody } from '../../../common/inference-body.js';
import { parseJsonBody } from '../../../common/json-body.js';
import { tensorBytes, type HostTensor, type ModelSignature, type V2Datatype } from '../../../common/tensor.js';

/**
 * gRPC ModelInfer requests and answers in both forms (typed contents, raw contents) for every
 * datatype, through the real protobuf encoding of the service: what a client sends is what the
 * replica's V2 parser gets, and what the engine answers is what the client reads.
 */

interface Case {
  datatype: V2Datatype;
  /** The tensor, three elements at the type's edges. */
  tensor: HostTensor;
  /** The typed contents a client writes for it; none for FP16 and BF16 (raw only). */
  typed?: InferTensorContents;
}

const t = (datatype: V2Datatype, data: HostTensor['data']): HostTensor => ({ datatype, dims: [1, 3], data });

const CASES: Case[] = [
  { datatype: 'BOOL', tensor: t('BOOL', Uint8Array.from([1, 0, 1])), typed: { bool_contents: [true, false, true] } },
  { datatype: 'UINT8', tensor: t('UINT8', Uint8Array.from([0, 7, 255])), typed: { uint_contents: [0, 7, 255] } },
  { datatype: 'UINT16', tensor: t('UINT16', Uint16Array.from([0, 7, 65535])), typed: { uint_contents: [0, 7, 65535] } },
  { datatype: 'UINT32', tensor: t('UINT32', Uint32Array.from([0, 7, 4294967295])), typed: { uint_contents: [0, 7, 4294967295] } },
  { datatype: 'UINT64', tensor: t('UINT64', BigUint64Array.from([0n, 9007199254740993n, 18446744073709551615n])), typed: { uint64_contents: ['0', '9007199254740993', '18446744073709551615'] } },
  { datatype: 'INT8', tensor: t('INT8', Int8Array.from([-128, 0, 127])), typed: { int_contents: [-128, 0, 127] } },
  { datatype: 'INT16', tensor: t('INT16', Int16Array.from([-32768, 1, 32767])), typed: { int_contents: [-32768, 1, 32767] } },
  { datatype: 'INT32', tensor: t('INT32', Int32Array.from([-2147483648, 1, 2147483647])), typed: { int_contents: [-2147483648, 1, 2147483647] } },
  {
    datatype: 'INT64',
    tensor: t('INT64', BigInt64Array.from([-9223372036854775808n, -9007199254740993n, 9223372036854775807n])),
    typed: { int64_contents: ['-9223372036854775808', '-9007199254740993', '9223372036854775807'] },
  },
  { datatype: 'FP32', tensor: t('FP32', Float32Array.from([1.5, Infinity, NaN])), typed: { fp32_contents: [1.5, Infinity, NaN] } },
  { datatype: 'FP64', tensor: t('FP64', Float64Array.from([0.1, -Infinity, 1e300])), typed: { fp64_contents: [0.1, -Infinity, 1e300] } },
  { datatype: 'BYTES', tensor: t('BYTES', ['a', 'héllo', '']), typed: { bytes_contents: [Buffer.from('a'), Buffer.from('héllo'), Buffer.alloc(0)] } },
  // 1.5, 65504 (the largest half), -inf as half bits; 1.5, -inf, NaN as bfloat16 bits.
  { datatype: 'FP16', tensor: t('FP16', Uint16Array.from([0x3e00, 0x7bff, 0xfc00])) },
  { datatype: 'BF16', tensor: t('BF16', Uint16Array.from([0x3fc0, 0xff80, 0x7fc0])) },
];

const signature = (datatype: V2Datatype): ModelSignature => ({ inputs: [{ name: 'x', datatype, shape: [-1, 3] }], outputs: [{ name: 'y', datatype, shape: [-1, 3] }] });

const service = inferenceServiceDefinition();
const infer = service['ModelInfer']!;
/** The request as the replica receives it: encoded by a client, decoded by the server. */
const overTheWire = (req: ModelInferRequest): ModelInferRequest => infer.requestDeserialize(infer.requestSerialize(req)) as ModelInferRequest;
const answerOverTheWire = (res: ModelInferAnswer): ModelInferResponse => infer.responseDeserialize(encodeResponse('ModelInfer', res)) as ModelInferResponse;
/** The answer as grpc-js's own serializer writes it: `fromObject` on a copy whose typed arrays are arrays, then encoded. */
const serializedByGrpcJs = (res: ModelInferAnswer): Buffer =>
  infer.responseSerialize({
    ...res,
    outputs: res.outputs.map((o) => (o.contents === undefined ? o : { ...o, contents: Object.fromEntries(Object.entries(o.contents).map(([k, v]) => [k, Array.from(v as ArrayLike<unknown>)])) })),
  });

/** What a ModelmuxError of `code` (and a message matching `message`) thrown looks like. */
const refusal = (code: string, message: string | RegExp = /./) => expect.objectContaining({ code, message: typeof message === 'string' ? message : expect.stringMatching(message) });

/** The values of a tensor, comparable whatever their storage (NaN is equal to NaN in toEqual). */
const valuesOf = (x: HostTensor): unknown[] => Array.from(x.data as ArrayLike<unknown>);

describe.each(CASES)('$datatype over gRPC', (c) => {
  const sig = signature(c.datatype);
  const bytes = Buffer.from(tensorBytes(c.tensor));

  it('reads raw_input_contents as the tensor, byte for byte', () => {
    const { body, binary, raw } = grpcInferBody(overTheWire({ model_name: 'm', inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3] }], raw_input_contents: [bytes] }));
    expect(raw).toBe(true);
    const req = parseInferBody(body, sig, binary);
    expect(req.inputs[0]!.dims).toEqual([1, 3]);
    expect(Buffer.from(tensorBytes(req.inputs[0]!)).equals(bytes)).toBe(true);
  });

  it('sends raw contents on as JSON data in sidecar mode, the same elements', () => {
    const { body, binary, raw } = grpcInferBody(overTheWire({ model_name: 'm', inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3] }], raw_input_contents: [bytes] }), false);
    expect({ raw, binary: binary.length }).toEqual({ raw: true, binary: 0 });
    // What the runtime receives: the body as JSON text, read back as the replica reads JSON.
    const req = parseInferBody(parseJsonBody(Buffer.from(JSON.stringify(body))), sig);
    expect(Buffer.from(tensorBytes(req.inputs[0]!)).equals(bytes)).toBe(true);
  });

  it('answers raw outputs when asked raw, byte for byte', () => {
    const req = parseInferBody(grpcInferBody({ model_name: 'm', inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3] }], raw_input_contents: [bytes] }).body, sig, bytes);
    const answer = answerOverTheWire(grpcInferResponse(inferResponseBody(req, 'm', [{ name: 'y', ...c.tensor }]), 'm', true));
    expect(answer.outputs).toEqual([expect.objectContaining({ name: 'y', datatype: c.datatype, shape: ['1', '3'], contents: null })]);
    expect(answer.raw_output_contents).toHaveLength(1);
    expect(Buffer.from(answer.raw_output_contents[0]!).equals(bytes)).toBe(true);
  });

  if (c.typed !== undefined) {
    const typed = c.typed;
    it('reads typed contents as the tensor', () => {
      const { body, binary, raw } = grpcInferBody(overTheWire({ model_name: 'm', inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3], contents: typed }] }));
      expect(raw).toBe(false);
      const req = parseInferBody(body, sig, binary);
      expect(req.inputs[0]!.data).toBeInstanceOf(c.tensor.data.constructor);
      expect(valuesOf(req.inputs[0]!)).toEqual(valuesOf(c.tensor));
    });

    it('answers typed contents when asked typed, only in the field of its datatype', () => {
      const req = parseInferBody(grpcInferBody({ model_name: 'm', inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3], contents: typed }] }).body, sig);
      const answer = answerOverTheWire(grpcInferResponse(inferResponseBody(req, 'm', [{ name: 'y', ...c.tensor }]), 'm', false));
      expect(answer.raw_output_contents).toEqual([]);
      const contents = answer.outputs[0]!.contents!;
      const set = Object.entries(contents).filter(([, v]) => Array.isArray(v) && v.length > 0);
      expect(set.map(([k]) => k)).toEqual(Object.keys(typed));
      const [field, want] = Object.entries(typed as Record<string, unknown>)[0]!;
      const got = (contents as Record<string, unknown[]>)[field]!;
      if (c.datatype === 'BYTES') expect(got.map((b) => Buffer.from(b as Uint8Array).toString())).toEqual(['a', 'héllo', '']);
      else expect(got).toEqual(want);
    });
  } else {
    it('refuses typed contents: the datatype has no typed field', () => {
      expect(() => grpcInferBody({ model_name: 'm', inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3], contents: { fp32_contents: [1, 2, 3] } }] })).toThrow(
        refusal('invalid_request', /send it in raw_input_contents/),
      );
    });

    it('answers raw outputs even to a typed request (no typed field can hold them)', () => {
      const req = parseInferBody({ inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3], data: [1, 2, 3] }], parameters: { binary_data_output: true } }, sig);
      const answer = grpcInferResponse(inferResponseBody(req, 'm', [{ name: 'y', ...c.tensor }]), 'm', false);
      expect(Buffer.from(answer.raw_output_contents[0]!).equals(bytes)).toBe(true);
      expect(answer.outputs[0]!.contents).toBeUndefined();
    });
  }
});

describe('gRPC requests the V2 parser refuses, with the HTTP codes', () => {
  const sig = signature('FP32');
  const parsed = (req: ModelInferRequest): unknown => {
    const { body, binary } = grpcInferBody(overTheWire(req));
    return parseInferBody(body, sig, binary);
  };

  it('refuses elements in the field of another datatype', () => {
    expect(() => parsed({ model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], contents: { int_contents: [1, 2, 3] } }] })).toThrow(
      refusal('invalid_request', 'input "x" is FP32: its elements go in fp32_contents, not int_contents'),
    );
  });

  it('refuses raw contents of another count than the inputs, and raw beside typed', () => {
    expect(() => parsed({ model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3] }], raw_input_contents: [Buffer.alloc(12), Buffer.alloc(12)] })).toThrow(
      refusal('invalid_request', /2 entries for 1 inputs/),
    );
    expect(() => parsed({ model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], contents: { fp32_contents: [1, 2, 3] } }], raw_input_contents: [Buffer.alloc(12)] })).toThrow(
      refusal('invalid_request', /use one or the other/),
    );
  });

  it('refuses raw bytes that do not fill the shape, and values that do not, as input_mismatch', () => {
    expect(() => parsed({ model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3] }], raw_input_contents: [Buffer.alloc(8)] })).toThrow(
      refusal('input_mismatch', 'input "x": 8 bytes of binary data for shape [1,3] (12 expected)'),
    );
    expect(() => parsed({ model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], contents: { fp32_contents: [1, 2] } }] })).toThrow(refusal('input_mismatch', /2 values/));
    expect(() => parsed({ model_name: 'm', inputs: [{ name: 'x', datatype: 'INT32', shape: [1, 3], contents: { int_contents: [1, 2, 3] } }] })).toThrow(refusal('input_mismatch', /datatype INT32/));
  });

  it('refuses a negative dimension and a UINT8 element past 255', () => {
    expect(() => parsed({ model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3], contents: { fp32_contents: [1, 2, 3] } }] })).toThrow(refusal('invalid_request', /dimension of -1/));
    const u8 = grpcInferBody({ model_name: 'm', inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, 3], contents: { uint_contents: [0, 256, 0] } }] });
    expect(() => parseInferBody(u8.body, signature('UINT8'))).toThrow(refusal('input_mismatch', /out of the range of UINT8/));
  });

  it('passes parameters and the id through, and asks every output as binary data', () => {
    const { body } = grpcInferBody(
      overTheWire({
        model_name: 'm',
        id: 'req-1',
        parameters: { priority: { int64_param: '9007199254740993' }, tag: { string_param: 'a' }, binary_data_output: { bool_param: false } },
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], contents: { fp32_contents: [1, 2, 3] } }],
        outputs: [{ name: 'y' }],
      }),
    );
    expect(body).toMatchObject({ id: 'req-1', parameters: { priority: '9007199254740993', tag: 'a', binary_data_output: true }, outputs: [{ name: 'y', parameters: {} }] });
    const req = parseInferBody(body, sig);
    expect(req.id).toBe('req-1');
    expect(req.binaryOutputs).toEqual(new Set(['y']));
  });
});

describe('answers of a sidecar runtime', () => {
  it('encodes JSON data a runtime answered instead of binary data', () => {
    const json = { model_name: 'm', outputs: [{ name: 'y', datatype: 'INT64', shape: [1, 2], data: [[9223372036854775807n, -1]] }] };
    const raw = grpcInferResponse({ json }, 'm', true);
    expect(Array.from(new BigInt64Array(new Uint8Array(raw.raw_output_contents[0]!).buffer))).toEqual([9223372036854775807n, -1n]);
    const typed = grpcInferResponse({ json }, 'm', false);
    expect(typed.outputs[0]!.contents).toEqual({ int64_contents: ['9223372036854775807', '-1'] });
  });

  it('slices one block of binary data by each output binary_data_size', () => {
    const json = {
      outputs: [
        { name: 'a', datatype: 'UINT8', shape: [2], parameters: { binary_data_size: 2 } },
        { name: 'b', datatype: 'UINT8', shape: [1], parameters: { binary_data_size: 1 } },
      ],
    };
    const answer = answerOverTheWire(grpcInferResponse({ json, binary: [Uint8Array.from([1, 2, 3])] }, 'm', false));
    expect(answer.outputs.map((o) => o.contents?.uint_contents)).toEqual([[1, 2], [3]]);
  });

  it('refuses, as inference_failed, JSON data that does not fill its shape', () => {
    const json = { outputs: [{ name: 'a', datatype: 'FP32', shape: [1, 3], data: [1, 2] }] };
    for (const raw of [true, false])
      expect(() => grpcInferResponse({ json }, 'm', raw)).toThrow(refusal('inference_failed', 'the inference answer cannot be sent over gRPC: output "a" has 2 elements for shape [1,3]'));
  });

  it('refuses, as inference_failed, an answer that is not a V2 answer or whose binary data is short', () => {
    expect(() => grpcInferResponse({ json: { predictions: [1] } }, 'm', true)).toThrow(refusal('inference_failed'));
    const short = { outputs: [{ name: 'a', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } }] };
    expect(() => grpcInferResponse({ json: short, binary: [new Uint8Array(4)] }, 'm', true)).toThrow(refusal('inference_failed', /past the end/));
  });

  it('carries metadata over, dynamic dimensions as -1', () => {
    const meta = grpcModelMetadata({ name: 'm', versions: ['1'], platform: 'onnxruntime_onnx', inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }], outputs: [] });
    const wire = service['ModelMetadata']!;
    expect(wire.responseDeserialize(wire.responseSerialize(meta))).toEqual({
      name: 'm',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'x', datatype: 'FP32', shape: ['-1', '3'] }],
      outputs: [],
    });
    expect(encodeResponse('ModelMetadata', meta).equals(wire.responseSerialize(meta))).toBe(true);
    expect(() => grpcModelMetadata({ error: 'x' })).toThrow(refusal('inference_failed'));
  });
});

describe("answers as they are written: from the engine's tensors, without a copy", () => {
  it.each(CASES)("$datatype: the same bytes as from the V2 JSON answer, and as grpc-js's serializer writes", (c) => {
    const sig = signature(c.datatype);
    const bytes = Buffer.from(tensorBytes(c.tensor));
    const req = parseInferBody(grpcInferBody({ model_name: 'm', id: 'r-1', inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 3] }], raw_input_contents: [bytes] }).body, sig, bytes);
    const body = inferResponseBody(req, 'm@2', [{ name: 'y', ...c.tensor }]);
    expect(body.tensors).toMatchObject({ model_name: 'm', model_version: '2', id: 'r-1' });
    for (const raw of [true, false]) {
      const fromTensors = grpcInferResponse(body, 'm@2', raw);
      // A sidecar runtime's answer is its JSON and bytes alone.
      const fromJson = grpcInferResponse({ json: body.json, ...(body.binary !== undefined ? { binary: body.binary } : {}) }, 'm@2', raw);
      const written = encodeResponse('ModelInfer', fromTensors);
      expect(written.equals(encodeResponse('ModelInfer', fromJson))).toBe(true);
      expect(written.equals(serializedByGrpcJs(fromTensors))).toBe(true);
      expect(answerOverTheWire(fromTensors)).toMatchObject({ model_name: 'm', model_version: '2', id: 'r-1' });
    }
  });

  it("writes request parameters (a composite route's members) as grpc-js does", () => {
    const answer = { ...grpcInferResponse({ json: { outputs: [{ name: 'y', datatype: 'FP32', shape: [1], data: [1.5] }] } }, 'm', false), parameters: { members: { string_param: 'a,b' } } };
    expect(encodeResponse('ModelInfer', answer).equals(serializedByGrpcJs(answer))).toBe(true);
    expect(answerOverTheWire(answer).parameters).toEqual({ members: { string_param: 'a,b', parameter_choice: 'string_param' } });
  });
});
