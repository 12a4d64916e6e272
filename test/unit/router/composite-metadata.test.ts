import type { ModelRouteSpec } from '../../../common/model-route.js';
import { compositeMetadata, type ModelMetadata } from '../../../router/composite/composite-metadata.js';

const classifier: ModelMetadata = {
  inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }],
  outputs: [
    { name: 'y', datatype: 'FP32', shape: [-1, 2] },
    { name: 'label', datatype: 'INT64', shape: [-1] },
  ],
};

describe('compositeMetadata', () => {
  it("an ensemble takes its first member's inputs and answers the outputs it combines, in the combined datatype", () => {
    const spec: ModelRouteSpec = { deploymentRef: { name: 'p' }, ensemble: { members: [{ model: 'a' }, { model: 'b' }], combine: 'mean' } };
    expect(compositeMetadata('avg', spec, classifier, undefined)).toEqual({
      name: 'avg',
      platform: 'modelmux_ensemble',
      inputs: classifier.inputs,
      outputs: [
        { name: 'y', datatype: 'FP32', shape: [-1, 2] },
        { name: 'label', datatype: 'FP64', shape: [-1] },
      ],
      parameters: { members: ['a', 'b'], combine: 'mean' },
    });
    const vote: ModelRouteSpec = { deploymentRef: { name: 'p' }, ensemble: { members: [{ model: 'a' }, { model: 'b' }], combine: 'vote', outputs: ['label'] } };
    expect((compositeMetadata('poll', vote, classifier, undefined) as ModelMetadata).outputs).toEqual([{ name: 'label', datatype: 'INT64', shape: [-1] }]);
  });

  it("a sequence takes its first step's inputs and answers its last step's outputs", () => {
    const spec: ModelRouteSpec = { deploymentRef: { name: 'p' }, sequence: { steps: [{ model: 'double' }, { model: 'classify', inputs: { input_ids: 'ids' } }] } };
    const double: ModelMetadata = { inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }], outputs: [{ name: 'ids', datatype: 'FP32', shape: [-1, 3] }] };
    expect(compositeMetadata('pipeline', spec, double, classifier)).toEqual({
      name: 'pipeline',
      platform: 'modelmux_sequence',
      inputs: double.inputs,
      outputs: classifier.outputs,
      parameters: { members: ['double', 'classify'] },
    });
  });
});
