import { ModelmuxError } from '../../../common/errors.js';
import { stepInputs, type StepSources } from '../../../router/composite/sequence-mapping.js';

const from: StepSources = {
  previousStep: 1,
  previousModel: 'tokenize',
  outputs: [
    { name: 'ids', datatype: 'INT64', shape: [1, 4], data: [1, 2, 3, 4] },
    { name: 'attention_mask', datatype: 'INT64', shape: [1, 4], data: [1, 1, 1, 0] },
  ],
  requestInputs: [{ name: 'text', datatype: 'BYTES', shape: [1], data: ['hi'] }],
};

function message(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ModelmuxError) return `${err.code} ${err.status}: ${err.message}`;
    throw err;
  }
  throw new Error('no error');
}

describe('stepInputs', () => {
  it('maps named outputs to inputs, passes the rest by name, drops what the model does not take', () => {
    const inputs = stepInputs(
      2,
      { model: 'classify', inputs: { input_ids: 'ids' } },
      [
        { name: 'input_ids', datatype: 'INT64', shape: [-1, 4] },
        { name: 'attention_mask', datatype: 'INT64', shape: [-1, -1] },
      ],
      from,
    );
    expect(inputs).toEqual([
      { name: 'input_ids', datatype: 'INT64', shape: [1, 4], data: [1, 2, 3, 4] },
      { name: 'attention_mask', datatype: 'INT64', shape: [1, 4], data: [1, 1, 1, 0] },
    ]);
  });

  it("falls back to the request's own inputs", () => {
    const inputs = stepInputs(2, { model: 'echo' }, [{ name: 'text', datatype: 'BYTES', shape: [-1] }], from);
    expect(inputs).toEqual([{ name: 'text', datatype: 'BYTES', shape: [1], data: ['hi'] }]);
  });

  it('names the step, the input and the missing tensor', () => {
    expect(message(() => stepInputs(2, { model: 'classify', inputs: { input_ids: 'tokens' } }, [{ name: 'input_ids', datatype: 'INT64', shape: [-1, 4] }], from))).toBe(
      'sequence_mapping 502: step 2 (classify): input "input_ids" (mapped from "tokens"): step 1 (tokenize) answered no output "tokens" (outputs: ids, attention_mask) and the request has no input of that name',
    );
    expect(message(() => stepInputs(3, { model: 'c' }, [{ name: 'x', datatype: 'FP32', shape: [-1] }], from))).toMatch(
      /^sequence_mapping 502: step 3 \(c\): input "x": step 1 \(tokenize\) answered no output "x"/,
    );
  });

  it('refuses a mapping to an input the model lacks, and tensors of another datatype or shape', () => {
    expect(message(() => stepInputs(2, { model: 'classify', inputs: { ids_typo: 'ids' } }, [{ name: 'ids', datatype: 'INT64', shape: [-1, 4] }], from))).toBe(
      'sequence_mapping 502: step 2 (classify): maps input "ids_typo", which the model does not have (inputs: ids)',
    );
    expect(message(() => stepInputs(2, { model: 'classify' }, [{ name: 'ids', datatype: 'FP32', shape: [-1, 4] }], from))).toBe(
      'sequence_mapping 502: step 2 (classify): input "ids" is FP32, but tensor "ids" is INT64',
    );
    expect(message(() => stepInputs(2, { model: 'classify' }, [{ name: 'ids', datatype: 'INT64', shape: [-1, 8] }], from))).toBe(
      'sequence_mapping 502: step 2 (classify): input "ids" has shape [-1,8], but tensor "ids" has [1,4]',
    );
    expect(message(() => stepInputs(2, { model: 'classify' }, [{ name: 'ids', datatype: 'INT64', shape: [4] }], from))).toMatch(/has shape \[4\], but tensor "ids" has \[1,4\]/);
  });
});
