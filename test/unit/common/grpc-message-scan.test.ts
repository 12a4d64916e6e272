import fc from 'fast-check';
import { decodeRequest, inferenceServiceDefinition, type ModelInferRequest } from '../../../common/grpc/inference-service.js';
import { GRPC_MESSAGE_BOUNDS, scanRequest } from '../../../common/grpc/message-scan.js';
import { ModelmuxError } from '../../../common/errors.js';

const encode = (method: string, message: unknown): Buffer => (inferenceServiceDefinition()[method] as { requestSerialize(v: unknown): Buffer }).requestSerialize(message);
const decodeRaw = (bytes: Buffer): unknown => (inferenceServiceDefinition()['ModelInfer'] as { requestDeserialize(b: Buffer): unknown }).requestDeserialize(bytes);

/** `count` copies of `entry` after a model name: the shape of issue 47's bomb. */
function repeated(entry: number[], count: number): Buffer {
  return Buffer.concat([Buffer.from([0x0a, 6, ...Buffer.from('wine-0')]), Buffer.alloc(entry.length * count).fill(Buffer.from(entry))]);
}

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(ModelmuxError);
    expect((err as ModelmuxError).code).toBe('invalid_request');
    return (err as ModelmuxError).message;
  }
  throw new Error('not refused');
}

const parameter = fc.oneof(fc.record({ bool_param: fc.boolean() }), fc.record({ int64_param: fc.integer() }), fc.record({ string_param: fc.string({ maxLength: 8 }) }));
const parameters = fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), parameter, { maxKeys: 4 });
const contents = fc.record(
  {
    bool_contents: fc.array(fc.boolean(), { maxLength: 5 }),
    int_contents: fc.array(fc.integer({ min: -1000, max: 1000 }), { maxLength: 5 }),
    int64_contents: fc.array(fc.integer(), { maxLength: 5 }),
    fp32_contents: fc.array(fc.float({ noNaN: true }), { maxLength: 5 }),
    fp64_contents: fc.array(fc.double({ noNaN: true }), { maxLength: 5 }),
    bytes_contents: fc.array(fc.uint8Array({ maxLength: 4 }), { maxLength: 5 }),
  },
  { requiredKeys: [] },
);
const input = fc.record({ name: fc.string({ maxLength: 8 }), datatype: fc.constantFrom('FP32', 'INT64', 'BYTES'), shape: fc.array(fc.nat(16), { maxLength: 4 }), parameters, contents });
const inferRequest = fc.record({
  model_name: fc.string({ maxLength: 12 }),
  model_version: fc.string({ maxLength: 3 }),
  id: fc.string({ maxLength: 8 }),
  parameters,
  inputs: fc.array(input, { maxLength: 4 }),
  outputs: fc.array(fc.record({ name: fc.string({ maxLength: 6 }), parameters }), { maxLength: 3 }),
  raw_input_contents: fc.array(fc.uint8Array({ maxLength: 16 }), { maxLength: 3 }),
});

describe('scanRequest, the one rule of valid request messages', () => {
  it('accepts every ModelInferRequest a protobuf encoder writes, and reads its head', () => {
    fc.assert(
      fc.property(inferRequest, (req) => {
        expect(scanRequest('ModelInfer', encode('ModelInfer', req))).toEqual({ name: req.model_name, version: req.model_version, id: req.id });
      }),
      { numRuns: 300 },
    );
  });

  it('never accepts a message that the full decode then fails on (cut, flipped and random bytes)', () => {
    const mutated = fc.tuple(inferRequest, fc.nat(), fc.nat(255), fc.nat()).map(([req, at, byte, cut]) => {
      const b = Buffer.from(encode('ModelInfer', req));
      if (b.length > 0) b[at % b.length] = byte;
      return b.subarray(0, b.length === 0 ? 0 : cut % (b.length + 1));
    });
    fc.assert(
      fc.property(
        fc.oneof(
          mutated,
          fc.uint8Array({ maxLength: 64 }).map((u) => Buffer.from(u)),
        ),
        (bytes) => {
          let scanned = true;
          try {
            scanRequest('ModelInfer', bytes);
          } catch (err) {
            expect((err as ModelmuxError).code).toBe('invalid_request');
            scanned = false;
          }
          if (scanned) expect(() => decodeRaw(bytes)).not.toThrow();
        },
      ),
      // Seeded: a run reports its counterexample the same way again. -1007133415 found the 32-bit varint case.
      { numRuns: 3000, seed: -1007133415 },
    );
  });

  it('refuses two million empty inputs at the 65th, without reading on: its cost is the bound’s, not the message’s', () => {
    const bomb = repeated([0x2a, 0x00], 2_000_000);
    expect(refusal(() => scanRequest('ModelInfer', bomb))).toMatch(/more than 64 inputs/);
    expect(refusal(() => decodeRequest('ModelInfer', bomb))).toMatch(/more than 64 inputs/);
    // Bytes that are no message at all, after the 65th entry, are never reached.
    expect(refusal(() => scanRequest('ModelInfer', Buffer.concat([repeated([0x2a, 0x00], 65), Buffer.from([0xff, 0xff, 0xff])])))).toMatch(/more than 64 inputs/);
    expect(refusal(() => scanRequest('ModelInfer', Buffer.concat([repeated([0x2a, 0x00], 64), Buffer.from([0xff, 0xff, 0xff])])))).toMatch(/past the end|not a valid message/);
  });

  it('bounds outputs, raw contents, parameters, dimensions and BYTES elements', () => {
    expect(refusal(() => scanRequest('ModelInfer', repeated([0x32, 0x00], 65)))).toMatch(/more than 64 outputs/);
    expect(refusal(() => scanRequest('ModelInfer', repeated([0x3a, 0x00], 65)))).toMatch(/more than 64 raw_input_contents/);
    // A parameters entry with a value: key "" and bool_param false.
    expect(refusal(() => scanRequest('ModelInfer', repeated([0x22, 0x04, 0x12, 0x02, 0x08, 0x00], 65)))).toMatch(/more than 64 parameters/);
    const shape = Buffer.alloc(66).fill(Buffer.from([0x18, 0x01]));
    expect(refusal(() => scanRequest('ModelInfer', Buffer.concat([Buffer.from([0x2a, shape.length]), shape])))).toMatch(/more than 32 dimensions/);
    const elements = GRPC_MESSAGE_BOUNDS.bytesElements + 1;
    const strings = Buffer.alloc(2 * elements).fill(Buffer.from([0x42, 0x00]));
    const contentsField = Buffer.concat([Buffer.from([0x2a]), varint(strings.length), strings]);
    const message = Buffer.concat([Buffer.from([0x2a]), varint(contentsField.length), contentsField]);
    expect(refusal(() => scanRequest('ModelInfer', message))).toMatch(/more than 65536 bytes_contents elements/);
  });

  it('refuses what the decode would choke on: a parameter without a value, a known field of the wrong wire type, groups', () => {
    // protobufjs decodes the entry's value as null and its toObject then throws (an internal error before).
    const noValue = repeated([0x22, 0x00], 1);
    expect(() => decodeRaw(noValue)).toThrow();
    expect(refusal(() => decodeRequest('ModelInfer', noValue))).toMatch(/has no value/);
    expect(refusal(() => scanRequest('ModelInfer', Buffer.from([0x08, 0x01])))).toMatch(/field 1 has wire type 0, not 2/);
    expect(refusal(() => scanRequest('ModelInfer', Buffer.from([0x0b, 0x0c])))).toMatch(/wire type 3/);
    expect(refusal(() => scanRequest('ModelInfer', Buffer.from([0x0a, 0x10, 0x61])))).toMatch(/past the end/);
    expect(refusal(() => scanRequest('ModelReady', Buffer.from([0xff, 0xff, 0xff])))).toMatch(/ModelReady request is not a valid message/);
    // A 32-bit varint of 9 bytes: protobufjs reads it as 10 and decodes the rest from the wrong
    // byte (found by the property below, seed -1007133415).
    const varintOf = (bytes: number): number[] => [...Array<number>(bytes - 1).fill(0xff), 0x01];
    const lengthDelimited = (tag: number, body: Buffer): Buffer => Buffer.concat([Buffer.from([tag, body.length]), body]);
    const inputWithContents = (field: number, varintBytes: number): Buffer => lengthDelimited(0x2a, lengthDelimited(0x2a, Buffer.from([(field << 3) | 0, ...varintOf(varintBytes)])));
    expect(refusal(() => scanRequest('ModelInfer', inputWithContents(2, 9)))).toMatch(/32-bit varint of 9 bytes/);
    expect(refusal(() => scanRequest('ModelInfer', inputWithContents(1, 6)))).toMatch(/32-bit varint of 6 bytes/);
    // A 10-byte 32-bit one is a negative int32, as protobufjs reads it; 64-bit fields take any length.
    for (const bytes of [1, 5, 10]) expect(() => decodeRequest('ModelInfer', inputWithContents(2, bytes))).not.toThrow();
    for (const bytes of [6, 9]) expect(() => decodeRequest('ModelInfer', inputWithContents(3, bytes))).not.toThrow();
    // Past 10 bytes no varint is valid, though skipping one works.
    expect(refusal(() => scanRequest('ModelInfer', inputWithContents(3, 11)))).toMatch(/varint of 11 bytes \(at most 10\)/);
  });

  it('skips fields it does not know, as proto3 does, and reads name and version of metadata and readiness requests', () => {
    const withUnknown = Buffer.concat([encode('ModelInfer', { model_name: 'm', inputs: [] } satisfies Partial<ModelInferRequest>), Buffer.from([0x40, 0x01, 0x4a, 0x01, 0x00])]);
    expect(scanRequest('ModelInfer', withUnknown)).toEqual({ name: 'm', version: '', id: '' });
    expect(scanRequest('ModelMetadata', encode('ModelMetadata', { name: 'beer', version: '' }))).toEqual({ name: 'beer', version: '', id: '' });
    expect(scanRequest('ModelReady', encode('ModelReady', { name: 'beer', version: '12' }))).toEqual({ name: 'beer', version: '12', id: '' });
    expect(scanRequest('ServerLive', Buffer.alloc(0))).toEqual({ name: '', version: '', id: '' });
  });
});

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}
