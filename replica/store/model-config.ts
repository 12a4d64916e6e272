import { z } from 'zod';
import { ModelmuxError } from '../../common/errors.js';
import { EXECUTION_PROVIDERS } from '../../common/resource.js';
import type { BatchPolicyOptions } from '../onnx/batch-policy.js';
import type { SessionOverrides } from '../onnx/graph-sessions.js';

/**
 * A model's own settings: `<ID>/config.json` beside its model.onnx, fetched and cached with it
 * (docs/model-configuration.md). Every field is optional; what a model leaves out comes from the
 * pool (the resource's spec, the replica's flags).
 */

export const MODEL_CONFIG_FILE = 'config.json';

/** A config.json larger than this is refused: it holds a handful of settings. */
export const MAX_MODEL_CONFIG_BYTES = 64 * 1024;

/** The max batch size a model that turns batching on gets when neither it nor its pool names one. */
export const DEFAULT_MODEL_MAX_BATCH_SIZE = 8;

export const modelConfigSchema = z
  .object({
    /**
     * Present: the model's rows are independent (row i of every output depends only on row i of
     * the inputs), so requests may be stacked on dim 0 and run as one. Absent: never batched.
     */
    dynamicBatching: z
      .object({
        maxBatchSize: z.number().int().min(1).max(1024).optional(),
        batchWaitMs: z.number().int().min(0).max(10_000).optional(),
      })
      .strict()
      .optional(),
    /** Threads one run of the model may use (onnxruntime's intra-op pool). */
    intraOpThreads: z.number().int().min(1).max(256).optional(),
    /** Threads running independent branches of the graph at once (onnxruntime's inter-op pool, parallel execution). */
    interOpThreads: z.number().int().min(1).max(256).optional(),
    executionProvider: z.enum(EXECUTION_PROVIDERS).optional(),
    /**
     * false: the model always gets a session of its own, never a shared graph's; true: a shared
     * graph even under CUDA, whatever its size. Absent: by provider and size (replica/onnx/session-kind.ts).
     */
    shareGraph: z.boolean().optional(),
    /**
     * The input of the run that warms the model before it is listed as loaded, as an Open
     * Inference Protocol request body (`{"inputs": […]}`); false: no warm-up run. Absent: zeros
     * of the model's input shapes, dynamic dims 1. Bounded by the file's size.
     */
    warmup: z.union([z.literal(false), z.looseObject({ inputs: z.array(z.unknown()).min(1) })]).optional(),
  })
  .strict();

export type ModelConfig = z.infer<typeof modelConfigSchema>;

/** The model's config.json, validated; 422 `model_load_failed` naming what is wrong. */
export function parseModelConfig(id: string, bytes: Uint8Array): ModelConfig {
  const bad = (why: string): ModelmuxError => new ModelmuxError('model_load_failed', `${MODEL_CONFIG_FILE} of model "${id}" ${why}`);
  if (bytes.length > MAX_MODEL_CONFIG_BYTES) throw bad(`is ${bytes.length} bytes, more than the ${MAX_MODEL_CONFIG_BYTES} allowed`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw bad('is not JSON');
  }
  const r = modelConfigSchema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw bad(`is invalid: ${issue ? `${issue.path.join('.') || 'the file'}: ${issue.message}` : 'invalid'}`);
  }
  return r.data;
}

/** How the model's requests are batched, or undefined when they run one by one. */
export function modelBatching(config: ModelConfig, pool: BatchPolicyOptions): BatchPolicyOptions | undefined {
  const b = config.dynamicBatching;
  if (b === undefined) return undefined;
  const maxBatchSize = b.maxBatchSize ?? (pool.maxBatchSize > 1 ? pool.maxBatchSize : DEFAULT_MODEL_MAX_BATCH_SIZE);
  if (maxBatchSize <= 1) return undefined;
  return { maxBatchSize, batchWaitMs: b.batchWaitMs ?? pool.batchWaitMs };
}

/** The session settings the model sets over its pool's. */
export function sessionOverrides(config: ModelConfig): SessionOverrides {
  return {
    ...(config.executionProvider !== undefined ? { provider: config.executionProvider } : {}),
    ...(config.intraOpThreads !== undefined ? { intraOpThreads: config.intraOpThreads } : {}),
    ...(config.interOpThreads !== undefined ? { interOpThreads: config.interOpThreads } : {}),
    ...(config.shareGraph !== undefined ? { shareGraph: config.shareGraph } : {}),
  };
}
