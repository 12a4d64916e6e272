import { ModelmuxError } from '../../common/errors.js';
import type { SequenceStep } from '../../common/model-route.js';
import type { V2Tensor } from './tensor-combine.js';

/** An input as a model's V2 metadata lists it: -1 is a dimension of any size. */
export interface InputSpec {
  name: string;
  datatype: string;
  shape: number[];
}

/** Where a step's inputs come from: the previous step's outputs, then the request's own inputs. */
export interface StepSources {
  /** 1-based number and model of the step before, for the messages. */
  previousStep: number;
  previousModel: string;
  outputs: readonly V2Tensor[];
  requestInputs: readonly V2Tensor[];
}

/**
 * The inputs of step `n` (1-based, n ≥ 2) of a sequence, by its model's metadata: each input
 * takes the tensor its `inputs` mapping names (input ← output), or one of the same name; that
 * tensor is looked for among the previous step's outputs first, then among the request's own
 * inputs (as a Triton ensemble's steps may read the ensemble's inputs). Any problem is a fault
 * of the route, not of the request: 502 `sequence_mapping`, naming the step, the input and the
 * tensor it was to take.
 */
export function stepInputs(n: number, step: SequenceStep, inputs: readonly InputSpec[], from: StepSources): V2Tensor[] {
  const where = `step ${n} (${step.model})`;
  const fail = (message: string): ModelmuxError => new ModelmuxError('sequence_mapping', `${where}: ${message}`);
  const mapping = step.inputs ?? {};
  for (const name of Object.keys(mapping)) {
    if (!inputs.some((i) => i.name === name)) throw fail(`maps input "${name}", which the model does not have (inputs: ${inputs.map((i) => i.name).join(', ')})`);
  }
  return inputs.map((spec) => {
    const source = mapping[spec.name] ?? spec.name;
    const tensor = from.outputs.find((o) => o.name === source) ?? from.requestInputs.find((i) => i.name === source);
    const taking = source === spec.name ? `input "${spec.name}"` : `input "${spec.name}" (mapped from "${source}")`;
    if (tensor === undefined) {
      throw fail(
        `${taking}: step ${from.previousStep} (${from.previousModel}) answered no output "${source}" (outputs: ${from.outputs.map((o) => o.name).join(', ') || 'none'}) and the request has no input of that name`,
      );
    }
    if (tensor.datatype !== spec.datatype) throw fail(`${taking} is ${spec.datatype}, but tensor "${source}" is ${tensor.datatype}`);
    const fits = tensor.shape.length === spec.shape.length && spec.shape.every((d, i) => d < 0 || d === tensor.shape[i]);
    if (!fits) throw fail(`${taking} has shape [${spec.shape.join(',')}], but tensor "${source}" has [${tensor.shape.join(',')}]`);
    return { name: spec.name, datatype: tensor.datatype, shape: tensor.shape, data: tensor.data };
  });
}
