import { expect } from '@jest/globals';
import { ModelmuxError } from '../../../common/errors.js';
import { createLogger } from '../../../common/log.js';
import { CompositeCodec } from '../../../router/composite/composite-codec.js';
import { CompositeWorkers } from '../../../router/composite/composite-workers.js';
import type { WrittenAnswer } from '../../../router/composite/composite-body.js';

const bytes = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));
const json = (b: Uint8Array | WrittenAnswer | undefined): unknown => JSON.parse(new TextDecoder().decode(b === undefined || b instanceof Uint8Array ? b : b.bytes));
const HTTP = { kind: 'http', inferenceHeaderLength: undefined } as const;

const x = {
  name: 'x',
  shape: [2, 2],
  datatype: 'FP32',
  data: [
    [1, 2],
    [3, 4],
  ],
};
const answer = (y: number[]): Uint8Array => bytes({ model_name: 'm', outputs: [{ name: 'y', datatype: 'FP32', shape: [2], data: y }] });

describe('CompositeCodec', () => {
  it('combines the answers it was given, by slot, into the answer it writes, and lets go of them when dropped', () => {
    const codec = new CompositeCodec();
    expect(codec.request(1, bytes({ id: 'r-1', inputs: [x] }), HTTP, false)).toBeUndefined();
    codec.answer(1, 0, answer([1, 2]));
    codec.answer(1, 2, answer([3, 6]));
    expect(json(codec.combine(1, [0, 2], ['a', 'c'], 'mean', ['y'], 'avg'))).toEqual({
      model_name: 'avg',
      id: 'r-1',
      outputs: [{ name: 'y', datatype: 'FP32', shape: [2], data: [2, 4] }],
      parameters: { members: ['a', 'c'] },
    });
    expect(codec.size).toBe(1);
    codec.drop(1);
    expect(codec.size).toBe(0);
    expect(() => codec.answer(1, 0, answer([1, 2]))).toThrow('no composite request 1 is held');
  });

  it("refuses the client's request with its catalogue error, and an answer that is no V2 answer with a plain error", () => {
    const codec = new CompositeCodec();
    expect(() => codec.request(1, bytes([[1, 2]]), HTTP, false)).toThrow(ModelmuxError);
    expect(() => codec.request(1, bytes({ inputs: [x] }), { kind: 'http', inferenceHeaderLength: '400' }, false)).toThrow(expect.objectContaining({ code: 'invalid_request' }));
    codec.request(2, bytes({ inputs: [x] }), HTTP, false);
    let thrown: unknown;
    try {
      codec.answer(2, 0, bytes({ predictions: [1] }));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect(thrown).not.toBeInstanceOf(ModelmuxError);
  });

  it("writes a sequence's first request without the outputs the client names, each later step's from the step before, and the last step's answer", () => {
    const codec = new CompositeCodec();
    const first = codec.request(7, bytes({ id: 's', inputs: [x], outputs: [{ name: 'label' }] }), HTTP, true);
    expect(json(first)).toEqual({ id: 's', inputs: [x] });
    codec.answer(
      7,
      1,
      bytes({
        model_name: 'double',
        outputs: [
          {
            name: 'ids',
            datatype: 'FP32',
            shape: [2, 2],
            data: [
              [2, 4],
              [6, 8],
            ],
          },
        ],
      }),
    );
    const second = codec.step(7, 1, 2, { model: 'classify', inputs: { input_ids: 'ids' } }, [{ name: 'input_ids', datatype: 'FP32', shape: [-1, 2] }], 'double', true);
    expect(json(second)).toEqual({ id: 's', inputs: [{ name: 'input_ids', datatype: 'FP32', shape: [2, 2], data: [2, 4, 6, 8] }], outputs: [{ name: 'label' }] });
    codec.answer(7, 2, bytes({ model_name: 'classify', outputs: [{ name: 'label', datatype: 'INT64', shape: [2], data: [1, 0] }] }));
    expect(json(codec.last(7, 2, ['double', 'classify'], 'pipeline'))).toEqual({
      model_name: 'pipeline',
      id: 's',
      outputs: [{ name: 'label', datatype: 'INT64', shape: [2], data: [1, 0] }],
      parameters: { members: ['double', 'classify'] },
    });
  });

  it('names the step and the tensor when a mapping does not fit', () => {
    const codec = new CompositeCodec();
    codec.request(3, bytes({ inputs: [x] }), HTTP, true);
    codec.answer(3, 1, answer([1, 2]));
    expect(() => codec.step(3, 1, 2, { model: 'classify', inputs: { input_ids: 'tokens' } }, [{ name: 'input_ids', datatype: 'FP32', shape: [-1] }], 'double', true)).toThrow(
      expect.objectContaining({ code: 'sequence_mapping', message: expect.stringMatching(/^step 2 \(classify\): input "input_ids" \(mapped from "tokens"\)/) }),
    );
  });

  it('writes its bytes each in an ArrayBuffer of their own, so a worker can hand them over', () => {
    const codec = new CompositeCodec();
    codec.request(4, bytes({ inputs: [x] }), HTTP, false);
    codec.answer(4, 0, answer([1, 2]));
    const out = codec.combine(4, [0], ['a'], 'first', undefined, 'f').bytes;
    expect(out.byteOffset).toBe(0);
    expect(out.byteLength).toBe(out.buffer.byteLength);
  });
});

describe('CompositeWorkers', () => {
  it('with no worker thread runs the codec on the event loop, a turn later, each port under a key of its own', async () => {
    const workers = new CompositeWorkers(
      0,
      createLogger({ component: 'test' }, () => undefined),
    );
    const [one, two] = [workers.port(), workers.port()];
    const read = one.call('request', bytes({ id: 'one', inputs: [x] }), HTTP, false);
    let settled = false;
    void read.then(() => (settled = true));
    expect(settled).toBe(false);
    await read;
    await two.call('request', bytes({ id: 'two', inputs: [x] }), HTTP, false);
    await one.call('answer', 0, answer([1, 2]));
    await two.call('answer', 0, answer([5, 6]));
    expect(json(await one.call('combine', [0], ['a'], 'first', undefined, 'f'))).toMatchObject({ id: 'one', outputs: [{ data: [1, 2] }] });
    expect(json(await two.call('combine', [0], ['a'], 'first', undefined, 'f'))).toMatchObject({ id: 'two', outputs: [{ data: [5, 6] }] });
    await expect(one.call('answer', 1, bytes({ predictions: [] }))).rejects.toThrow(/not an Open Inference Protocol answer/);
  });
});
