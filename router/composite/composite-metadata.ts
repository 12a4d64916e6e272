import { z } from 'zod';
import type { ModelRouteSpec } from '../../common/model-route.js';
import { MAX_TENSOR_RANK } from '../../common/tensor.js';
import { parseAnswer } from './composite-body.js';
import { combinedDatatype } from './tensor-combine.js';

/**
 * `GET …/v2/models/{route}` of an ensemble or a sequence, pure: the V2 metadata a client reads
 * before it sends a request (tritonclient's `get_model_metadata`). An ensemble takes what its
 * first member takes and answers the outputs it combines, in the datatype the combine gives
 * them; a sequence takes what its first step takes and answers what its last step answers.
 */

const tensorSchema = z.object({ name: z.string().min(1), datatype: z.string().min(1), shape: z.array(z.number().int()).max(MAX_TENSOR_RANK) });

const metadataSchema = z.object({ inputs: z.array(tensorSchema), outputs: z.array(tensorSchema) });

export type ModelMetadata = z.infer<typeof metadataSchema>;

/** A model's V2 metadata answer; throws a plain Error saying what is wrong with it. */
export function parseModelMetadata(body: Buffer): ModelMetadata {
  return parseAnswer(metadataSchema, body, 'model metadata');
}

/**
 * The metadata of route `name`: `first` is the first member's (or step's) metadata, `last`
 * the last step's (sequences only). `platform` says what the route is; `members` its models.
 */
export function compositeMetadata(name: string, spec: ModelRouteSpec, first: ModelMetadata, last: ModelMetadata | undefined): unknown {
  const e = spec.ensemble;
  if (e !== undefined) {
    const outputs = e.outputs === undefined ? first.outputs : first.outputs.filter((o) => e.outputs?.includes(o.name));
    return {
      name,
      platform: 'modelmux_ensemble',
      inputs: first.inputs,
      outputs: outputs.map((o) => ({ ...o, datatype: combinedDatatype(e.combine, o.datatype) })),
      parameters: { members: e.members.map((m) => m.model), combine: e.combine },
    };
  }
  return { name, platform: 'modelmux_sequence', inputs: first.inputs, outputs: (last ?? first).outputs, parameters: { members: spec.sequence?.steps.map((s) => s.model) ?? [] } };
}
