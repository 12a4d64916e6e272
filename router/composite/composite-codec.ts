import type { EnsembleCombiner, SequenceStep } from '../../common/model-route.js';
import { encode, parseCompositeRequest, parseInferAnswer, requestTensors, writeAnswer, type AnswerForm, type ClientForm, type V2Request, type WrittenAnswer } from './composite-body.js';
import { stepInputs, type InputSpec } from './sequence-mapping.js';
import { combineOutputs, type V2Tensor } from './tensor-combine.js';

/** What the codec holds for one composite request (one key): its request, and its members' outputs by slot. */
interface Held {
  request: V2Request;
  answer: AnswerForm;
  requestInputs: V2Tensor[] | undefined;
  outputs: Map<number, V2Tensor[]>;
}

/**
 * The tensor work of ensembles and sequences, the whole of what costs CPU in proportion to their
 * bodies: reading the client's request and the members' answers, combining them, writing each
 * later step's request and the answer (ADR 0041). Bytes in, bytes out: what it parses stays
 * here, under the key of the composite request that asked, until `drop`. One instance runs in
 * each of the router's composite worker threads (composite-workers.ts), away from the event
 * loop that serves every client. Throws a ModelmuxError for the request's own errors, a plain
 * Error for an answer that is no V2 answer.
 */
export class CompositeCodec {
  private readonly held = new Map<number, Held>();

  /**
   * Reads and checks the client's request (composite-body.ts) and keeps it under `key`. Returns
   * the JSON body its members are sent, or undefined when the client's body is that already:
   * without its `outputs` when `withoutOutputs` (a sequence's first step: they name outputs of its
   * last step).
   */
  request(key: number, body: Uint8Array, form: ClientForm, withoutOutputs: boolean): Uint8Array | undefined {
    const { request, answer, plain } = parseCompositeRequest(Buffer.from(body.buffer, body.byteOffset, body.byteLength), form);
    this.held.set(key, { request, answer, requestInputs: undefined, outputs: new Map() });
    if (withoutOutputs && request.outputs !== undefined) return encode({ ...request, outputs: undefined });
    return plain ? undefined : encode(request);
  }

  /** Reads a member's (or a step's) 200 answer and keeps its outputs in `slot`; throws a plain Error when it is no V2 answer. */
  answer(key: number, slot: number, body: Uint8Array): void {
    this.of(key).outputs.set(slot, parseInferAnswer(Buffer.from(body.buffer, body.byteOffset, body.byteLength)));
  }

  /** The ensemble's answer from the outputs in `slots`, named `members` (combineOutputs). */
  combine(key: number, slots: number[], members: string[], combine: EnsembleCombiner, outputs: string[] | undefined, name: string): WrittenAnswer {
    const held = this.of(key);
    const answered = slots.map((slot, i) => ({ member: members[i] as string, outputs: this.outputsOf(held, slot) }));
    return writeAnswer(held.answer, name, held.request.id, combineOutputs(answered, combine, outputs), members);
  }

  /**
   * The request of step `n` of a sequence from its model's `inputs` (metadata), the previous
   * step's outputs (`slot`, then let go) and the request's own inputs (sequence-mapping.ts).
   * The last step is asked for the outputs the client's request names.
   */
  step(key: number, slot: number, n: number, step: SequenceStep, inputs: InputSpec[], previousModel: string, last: boolean): Uint8Array {
    const held = this.of(key);
    const request = held.request;
    held.requestInputs ??= requestTensors(request);
    const tensors = stepInputs(n, step, inputs, { previousStep: n - 1, previousModel, outputs: this.outputsOf(held, slot), requestInputs: held.requestInputs });
    held.outputs.delete(slot);
    return encode({
      ...(request.id !== undefined ? { id: request.id } : {}),
      inputs: tensors,
      ...(last && request.outputs !== undefined ? { outputs: request.outputs.map((o) => ({ name: o.name })) } : {}),
    });
  }

  /** The sequence's answer: the outputs of its last step (`slot`). */
  last(key: number, slot: number, members: string[], name: string): WrittenAnswer {
    const held = this.of(key);
    return writeAnswer(held.answer, name, held.request.id, this.outputsOf(held, slot), members);
  }

  /** The composite request ended: what it held is let go. */
  drop(key: number): void {
    this.held.delete(key);
  }

  /** Composite requests held now. */
  get size(): number {
    return this.held.size;
  }

  private of(key: number): Held {
    const held = this.held.get(key);
    if (held === undefined) throw new Error(`no composite request ${key} is held`);
    return held;
  }

  private outputsOf(held: Held, slot: number): V2Tensor[] {
    const outputs = held.outputs.get(slot);
    if (outputs === undefined) throw new Error(`no answer is held in slot ${slot}`);
    return outputs;
  }
}
