import { z } from 'zod';
import { LOG_LEVELS } from './log.js';
import { runtimeSchema } from './runtime-spec.js';

/**
 * The MultiplexedDeployment spec: the one definition. The CRD's openAPIV3Schema in crds/ is
 * generated from it (a test fails on drift), and the operator, router and CLI derive their
 * types from it.
 */

/**
 * A Kubernetes quantity. YAML authors write `nvidia.com/gpu: 1` as an integer and `memory: 8Gi`
 * as a string, so both are accepted (the CRD marks it x-kubernetes-int-or-string); consumers
 * always see the string form.
 */
const quantity = z.union([z.number().int().min(0), z.string().regex(/^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P|E|Ei)?$/, 'must be a Kubernetes quantity such as 512Mi or 2')]).transform(String);

/**
 * How a full replica cache picks what stays (ADR 0017). Declared here because the resource and
 * the replica's own flags both accept it and must agree.
 */
export const CACHE_POLICIES = ['lru', 'frequency'] as const;
export type CachePolicy = (typeof CACHE_POLICIES)[number];

/** Loads of different models at once per replica: the resource's field and the replica's flag. */
export const CONCURRENT_LOADS = { min: 1, max: 64, default: 2 } as const;

/**
 * Shortest gap between two patches of a replica's table annotation: the resource's field and
 * the replica's flag. About one patch a second per replica however fast its models churn
 * (ADR 0029); the flag alone also takes 0, for tests.
 */
export const TABLE_PUBLISH_INTERVAL_MS = { min: 100, max: 60_000, default: 1000 } as const;

/** Models one replica may keep loaded: the resource's bound and the replica's flag. */
export const MAX_MODELS_PER_REPLICA = 10_000;

/** Where a replica runs its models: the resource's field and the replica's flag. */
export const EXECUTION_PROVIDERS = ['cpu', 'cuda'] as const;

/**
 * Threads one run of a model may use: the resource's field and the replica's flag (a model's
 * config.json may set its own). 1 by default: a replica's parallelism is its concurrent requests.
 */
export const INTRA_OP_THREADS = { min: 1, max: 256, default: 1 } as const;

export const resourceListSchema = z.record(z.string().min(1).max(253), quantity);

export const modelSourceSchema = z
  .object({
    /** `s3://bucket/prefix` or `file:///dir`; model ID lives at `<uri>/<ID>/model.onnx`. */
    uri: z.string().regex(/^(s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?|file:\/\/\/.*)$/, 'must be s3://bucket[/prefix] or file:///dir'),
    /** S3-compatible endpoint (MinIO, SeaweedFS, …); AWS when absent. */
    endpoint: z.url().optional(),
    region: z.string().min(1).max(64).default('us-east-1'),
    /** Path-style addressing, which most S3-compatible servers need. Defaults to true when an endpoint is set. */
    forcePathStyle: z.boolean().optional(),
    /** Secret in the resource's namespace with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY keys. */
    credentialsSecret: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
      .max(253)
      .optional(),
  })
  .strict();

export const batchingSchema = z
  .object({
    /** Requests for one model gathered into one run; 1 turns batching off. */
    maxBatchSize: z.number().int().min(1).max(1024).default(1),
    /** How long the first request of a batch waits for others. */
    batchWaitTimeoutMs: z.number().int().min(0).max(10000).default(0),
  })
  .strict();

/** One of Kubernetes' HPAScalingPolicy (autoscaling/v2): at most `value` pods or percent per `periodSeconds`. */
const hpaScalingPolicySchema = z
  .object({
    type: z.enum(['Pods', 'Percent']),
    value: z.number().int().min(1).max(10000),
    periodSeconds: z.number().int().min(1).max(1800),
  })
  .strict();

/**
 * Kubernetes' HPAScalingRules for one direction. A field given replaces the operator's default
 * for that field only (operator/resources/hpa.ts, docs/autoscaling.md).
 */
const hpaScalingRulesSchema = z
  .object({
    stabilizationWindowSeconds: z.number().int().min(0).max(3600).optional(),
    selectPolicy: z.enum(['Max', 'Min', 'Disabled']).optional(),
    policies: z.array(hpaScalingPolicySchema).min(1).max(10).optional(),
  })
  .strict();

export const autoscalingSchema = z
  .object({
    /**
     * 0 lets the HPA take the pool to zero and back on the requests the routers hold for it
     * (operator/resources/hpa.ts; needs Kubernetes' HPAScaleToZero feature gate).
     */
    minReplicas: z.number().int().min(0).max(1000).default(1),
    maxReplicas: z.number().int().min(1).max(1000),
    /** Average ongoing requests per replica the HPA aims for. */
    targetOngoingRequests: z.number().positive().max(10000).default(8),
    /** The HPA's `behavior` (autoscaling/v2), over the operator's defaults. */
    behavior: z.object({ scaleUp: hpaScalingRulesSchema.optional(), scaleDown: hpaScalingRulesSchema.optional() }).strict().optional(),
  })
  .strict()
  // The same rule twice, side by side: zod for the programs, CEL for the API server (the CRD
  // generator copies the meta), so `kubectl apply` refuses it before the operator sees it.
  .refine((a) => a.minReplicas <= a.maxReplicas, { message: 'minReplicas must not exceed maxReplicas', path: ['minReplicas'] })
  .meta({ 'x-kubernetes-validations': [{ rule: 'self.minReplicas <= self.maxReplicas', message: 'minReplicas must not exceed maxReplicas' }] });

export const multiplexedDeploymentSpecSchema = z
  .object({
    replicas: z.number().int().min(0).max(1000).default(1),
    /** Path prefix the router serves this deployment under, e.g. `/wine`. */
    routePrefix: z
      .string()
      .regex(/^\/[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be one path segment such as /wine')
      .max(64),
    /** Replica image; the operator's default image when absent. */
    image: z.string().min(1).max(512).optional(),
    modelSource: modelSourceSchema,
    maxModelsPerReplica: z.number().int().min(1).max(MAX_MODELS_PER_REPLICA).default(3),
    /** Byte bound of the loaded models of one replica, as a quantity (e.g. 4Gi). */
    maxModelBytesPerReplica: quantity.optional(),
    /**
     * `frequency` lets a model into a full cache only if it was asked for at least as often lately
     * as the one it would evict, so rare models do not push out popular ones; `lru` is Ray Serve's.
     */
    cachePolicy: z.enum(CACHE_POLICIES).default('frequency'),
    /** Loads of different models at once per replica; more make each S3 download slower (`npm run bench:cold`). */
    maxConcurrentLoads: z.number().int().min(CONCURRENT_LOADS.min).max(CONCURRENT_LOADS.max).default(CONCURRENT_LOADS.default),
    maxOngoingRequests: z.number().int().min(1).max(100000).default(16),
    matchTimeoutSeconds: z.number().min(0).max(60).default(1),
    batching: batchingSchema.default({ maxBatchSize: 1, batchWaitTimeoutMs: 0 }),
    resources: z.object({ requests: resourceListSchema.optional(), limits: resourceListSchema.optional() }).strict().default({}),
    /** sizeLimit of the emptyDir that caches downloaded model files. */
    // prefault, not default: the default goes through the transform and so shows in the CRD schema.
    modelCacheSize: quantity.prefault('10Gi'),
    /**
     * Host memory per replica for the files of models evicted from the device, as a quantity
     * (e.g. 8Gi): reloading one skips the disk and the store (ADR 0047). Absent: none. Add it
     * to the memory limit; worth it mostly with executionProvider cuda.
     */
    hostTierSize: quantity.optional(),
    executionProvider: z.enum(EXECUTION_PROVIDERS).default('cpu'),
    /**
     * cuda only: device memory one replica's loaded models may take, as a quantity (e.g. 70Gi);
     * absent, the GPU's memory less 10% (at least 1 GiB). ADR 0046.
     */
    deviceMemoryBytesPerReplica: quantity.optional(),
    /**
     * Threads one run of a model may use (onnxruntime's intra-op threads), for models whose
     * config.json does not say: more make a large model faster at one request, at the cost of
     * the cores other requests would use. Match it to the pod's CPU.
     */
    intraOpThreads: z.number().int().min(INTRA_OP_THREADS.min).max(INTRA_OP_THREADS.max).default(INTRA_OP_THREADS.default),
    /**
     * Models of one graph share one onnxruntime session, so a load creates none (ADR 0016); false
     * restores per-model sessions for models that need optimisations folding constant weights.
     */
    shareGraphs: z.boolean().default(true),
    /**
     * With shareGraphs, a load maps the model's file instead of reading it, its weights aligned
     * once at download (ADR 0021); false reads them, as before it.
     */
    mapWeights: z.boolean().default(true),
    /**
     * Shortest gap between two patches of a replica's table annotation: the pool writes at most
     * replicas × 1000 / this patches a second to the API server, whatever its load rate.
     */
    tablePublishIntervalMs: z.number().int().min(TABLE_PUBLISH_INTERVAL_MS.min).max(TABLE_PUBLISH_INTERVAL_MS.max).default(TABLE_PUBLISH_INTERVAL_MS.default),
    /** The replicas' log level: `warn` drops the four info lines of every load and eviction. */
    logLevel: z.enum(LOG_LEVELS).default('info'),
    autoscaling: autoscalingSchema.optional(),
    /** A serving runtime beside each replica instead of the built-in engine (docs/sidecar.md). */
    runtime: runtimeSchema(quantity, resourceListSchema).optional(),
  })
  .strict();

export type MultiplexedDeploymentSpec = z.infer<typeof multiplexedDeploymentSpecSchema>;
export type MultiplexedDeploymentSpecInput = z.input<typeof multiplexedDeploymentSpecSchema>;

export const conditionSchema = z.object({
  type: z.enum(['Ready', 'Progressing', 'Degraded', 'TablesBounded']),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string(),
  message: z.string(),
  lastTransitionTime: z.string(),
  observedGeneration: z.number().int().optional(),
});

export const multiplexedDeploymentStatusSchema = z.object({
  observedGeneration: z.number().int().optional(),
  replicas: z.number().int().optional(),
  readyReplicas: z.number().int().optional(),
  /** Label selector string for the scale subresource (HPA, kubectl scale). */
  selector: z.string().optional(),
  conditions: z.array(conditionSchema).optional(),
});

export type Condition = z.infer<typeof conditionSchema>;
export type MultiplexedDeploymentStatus = z.infer<typeof multiplexedDeploymentStatusSchema>;

export interface MultiplexedDeployment {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; uid?: string; generation?: number; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: MultiplexedDeploymentSpec;
  status?: MultiplexedDeploymentStatus;
}
