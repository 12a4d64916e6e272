import { readFile } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import { ModelmuxError } from '../../common/errors.js';
import { wineModelBytes } from '../../common/wine-model.js';
import { diagnoseCuda } from '../../common/cuda/diagnose.js';
import type { ModelSession } from './model-session.js';
import { bf16Session, widenBf16Edges, type Bf16Edges } from './bf16-edges.js';
import { datatypeFromOrt, ORT_TYPE, type HostTensor, type ModelSignature, type TensorData, type TensorSpec, type UnservedOutput } from '../../common/tensor.js';

export type ExecutionProvider = 'cpu' | 'cuda';
export const GRAPH_OPTIMIZATION_LEVELS = ['disabled', 'basic', 'extended', 'all'] as const;
export type GraphOptimizationLevel = (typeof GRAPH_OPTIMIZATION_LEVELS)[number];

/** What a deployment may tune in how its sessions are created. */
export interface SessionTuning {
  graphOptimization: GraphOptimizationLevel;
  prepackWeights: boolean;
  /** Models of one shape share one session, their weights fed as inputs (replica/onnx/shared-graph.ts). */
  shareGraphs: boolean;
  /** Threads of one run (onnxruntime's intra-op pool); 1 by default, see SESSION_OPTIONS. */
  intraOpThreads: number;
  /** Threads running independent branches at once; above 1 the session executes in parallel mode. */
  interOpThreads: number;
}

/** The tensor spec of an input or output, or why it cannot be served. */
function specOf(m: ort.InferenceSession.ValueMetadata): TensorSpec | string {
  if (!m.isTensor) return 'it is not a tensor (a sequence or map, such as ZipMap makes); only tensors are served';
  const datatype = datatypeFromOrt(m.type);
  if (!datatype) return `its element type ${m.type} has no Open Inference Protocol datatype`;
  return { name: m.name, datatype, shape: m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) };
}

/** A model's signature: an input that cannot be fed refuses the model; an output that cannot be answered is left out, with its reason. */
function signatureOf(session: ort.InferenceSession, weights: Readonly<Record<string, ort.Tensor>>): ModelSignature {
  const inputs = session.inputMetadata
    .filter((m) => !Object.hasOwn(weights, m.name))
    .map((m) => {
      const spec = specOf(m);
      if (typeof spec === 'string') throw new ModelmuxError('model_load_failed', `input "${m.name}" cannot be fed: ${spec}`);
      return spec;
    });
  const outputs: TensorSpec[] = [];
  const unserved: UnservedOutput[] = [];
  for (const m of session.outputMetadata) {
    const spec = specOf(m);
    if (typeof spec === 'string') unserved.push({ name: m.name, reason: spec });
    else outputs.push(spec);
  }
  if (outputs.length === 0) throw new ModelmuxError('model_load_failed', `the model has no output that can be served (${unserved.map((u) => `"${u.name}": ${u.reason}`).join('; ')})`);
  return unserved.length > 0 ? { inputs, outputs, unserved } : { inputs, outputs };
}

/**
 * The runtime's tensor of a host tensor. onnxruntime-node's binding reads float16 data only as
 * a Uint16Array, while onnxruntime-common's Tensor turns a Uint16Array into a Float16Array where
 * one exists: the bit patterns are put back as the tensor's CPU data (a field of its class).
 */
function ortTensor(t: HostTensor): ort.Tensor {
  const tensor = new ort.Tensor(ORT_TYPE[t.datatype] as 'float32', t.data as Float32Array, t.dims);
  if (t.datatype === 'FP16') (tensor as unknown as { cpuData: Uint16Array }).cpuData = t.data as Uint16Array;
  return tensor;
}

/** A host tensor's data from the runtime's: float16 back to its bit patterns. */
function hostData(datatype: HostTensor['datatype'], r: ort.Tensor): TensorData {
  const data = r.data as TensorData | (ArrayLike<number> & ArrayBufferView);
  if (datatype === 'FP16' && !(data instanceof Uint16Array)) {
    const view = data as ArrayBufferView;
    return new Uint16Array(view.buffer, view.byteOffset, view.byteLength / 2);
  }
  return data as TensorData;
}

/**
 * A multiplexing replica creates sessions all the time, so creation cost is chosen over the last
 * few percent of run speed. Measured on the 5 MB wine MLP (docs/adr/0015-replica-load-path.md):
 * graph optimisation 'all' → 'basic' took creation from 14.6 to 6.2 ms, and no weight pre-packing
 * from there to 2.5 ms, with single-row runs as fast or faster. Both are per-deployment knobs.
 *
 * One thread per session by default, no spin-waiting. onnxruntime's default gives every session
 * its own pool of one thread per core that spins between runs: with N models loaded that is N
 * pools fighting over the same cores. A replica gets its parallelism from concurrent requests,
 * not from splitting one small run; this cut creation from 34 to 13 ms and the CPU of 200 runs
 * by 2.8× (docs/adr/0012-router-placement-and-replica-threads.md). Large models (real CNNs) run
 * faster on more: the pool's default (`intraOpThreads`) and a model's config.json can raise it.
 */
const SESSION_OPTIONS = (provider: ExecutionProvider, tuning: SessionTuning): ort.InferenceSession.SessionOptions => ({
  executionProviders: [provider],
  graphOptimizationLevel: tuning.graphOptimization,
  executionMode: tuning.interOpThreads > 1 ? 'parallel' : 'sequential',
  intraOpNumThreads: tuning.intraOpThreads,
  interOpNumThreads: tuning.interOpThreads,
  extra: { session: { disable_prepacking: tuning.prepackWeights ? '0' : '1', intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
});

const BF16_REFUSAL = /Unsupported data type: 16\b/;

/** Creates a session from a file path or model bytes; a model onnxruntime refuses is `model_load_failed` (422). */
export async function createSession(model: string | Uint8Array, provider: ExecutionProvider, tuning: SessionTuning): Promise<ort.InferenceSession> {
  try {
    // Two calls only because create's overloads take a path or bytes, not their union.
    return await (typeof model === 'string' ? ort.InferenceSession.create(model, SESSION_OPTIONS(provider, tuning)) : ort.InferenceSession.create(model, SESSION_OPTIONS(provider, tuning)));
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // onnxruntime-node reads no bfloat16 tensor (onnx type 16) at a graph's edge; inside it is fine.
    const hint = BF16_REFUSAL.test(message) ? ' (bfloat16: onnxruntime-node cannot open a model with a bfloat16 input or output; cast them to float32 or float16 in the graph)' : '';
    throw new ModelmuxError('model_load_failed', `onnxruntime cannot load the model: ${message}${hint}`, { cause: err });
  }
}

/** A session and the weights fed to each of its runs beside the request's inputs. */
export interface FedSession {
  session: ort.InferenceSession;
  weights: Readonly<Record<string, ort.Tensor>>;
}

/**
 * A model served by `session`. `weights` are fed to every run beside the request's inputs and
 * are not part of the model's signature: they are how a shared graph becomes this model.
 * `singleRow`, when given, runs the requests of one row instead: the same model, computed by a
 * graph that is faster for one row (replica/onnx/single-row-graph.ts).
 */
export function modelSession(session: ort.InferenceSession, release: () => Promise<void>, weights: Readonly<Record<string, ort.Tensor>> = {}, singleRow?: FedSession): ModelSession {
  // Outputs that cannot be answered (e.g. sklearn-onnx's ZipMap probabilities) are not fetched:
  // the others are still served.
  const signature = signatureOf(session, weights);
  const fetches = signature.outputs.map((o) => o.name);
  const batchable = [...signature.inputs, ...signature.outputs].every((s) => s.shape.length > 0 && s.shape[0] === -1);
  const asLoaded: FedSession = { session, weights };
  return {
    signature,
    batchable,
    run: async (inputs) => {
      const use = singleRow && inputs.length > 0 && inputs.every((t) => t.dims[0] === 1) ? singleRow : asLoaded;
      const feeds: Record<string, ort.Tensor> = { ...use.weights };
      signature.inputs.forEach((spec, i) => {
        const t = inputs[i];
        if (t) feeds[spec.name] = ortTensor(t);
      });
      let results: ort.InferenceSession.ReturnType;
      try {
        results = await use.session.run(feeds, fetches);
      } catch (err) {
        throw new ModelmuxError('inference_failed', `onnxruntime failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
      return signature.outputs.map((spec) => {
        const r = results[spec.name];
        if (!r) throw new ModelmuxError('inference_failed', `onnxruntime returned no output "${spec.name}"`);
        return { name: spec.name, datatype: spec.datatype, dims: [...r.dims], data: hostData(spec.datatype, r) };
      });
    },
    release,
  };
}

/** Opens a model file (its path or its bytes) with a session of its own. */
export async function openModel(model: string | Uint8Array, provider: ExecutionProvider, tuning: SessionTuning): Promise<ModelSession> {
  let session: ort.InferenceSession;
  let edges: Bf16Edges | undefined;
  try {
    session = await createSession(model, provider, tuning);
  } catch (err) {
    // A graph with bfloat16 inputs or outputs opens once widened to float32 there (replica/onnx/bf16-edges.ts).
    if (!(err instanceof ModelmuxError && BF16_REFUSAL.test(err.message))) throw err;
    edges = widenBf16Edges(typeof model === 'string' ? await readFile(model) : model);
    if (!edges) throw err;
    session = await createSession(edges.model, provider, tuning);
  }
  try {
    const served = modelSession(session, () => session.release());
    return edges ? bf16Session(served, edges) : served;
  } catch (err) {
    await session.release().catch(() => undefined);
    throw err;
  }
}

/** Opens and closes a session on `provider`: throws onnxruntime's error where the provider cannot run. */
export async function probeExecutionProvider(provider: ExecutionProvider): Promise<void> {
  const probe = await ort.InferenceSession.create(wineModelBytes('provider-probe'), { executionProviders: [provider] });
  await probe.release();
}

/**
 * Fails at start, with the doctor's reason (`modelmux doctor`), when the configured provider
 * cannot run a model here, rather than on the first request. `cudaFolder` is MODELMUX_CUDA_LIBS.
 */
export async function checkExecutionProvider(provider: ExecutionProvider, cudaFolder: string | undefined): Promise<void> {
  if (provider === 'cpu') return;
  try {
    await probeExecutionProvider(provider);
  } catch (err) {
    const diagnosis = await diagnoseCuda(cudaFolder, () => probeExecutionProvider(provider));
    throw new Error(`execution provider "${provider}" cannot run here: ${diagnosis.state}: ${diagnosis.reason}`, { cause: err });
  }
}
