import { z } from 'zod';
import { REPLICA_PORT } from './replica-env.js';

/**
 * `spec.runtime` of a MultiplexedDeployment (docs/sidecar.md): a serving runtime that speaks the
 * V2 protocol with its model repository extension (MLServer; Triton with
 * --model-control-mode=explicit), run in each replica pod beside the modelmux replica, which
 * becomes its sidecar: it keeps the model cache, copies model folders into the volume both share
 * and has the runtime load and unload them.
 */

const envVarSchema = z
  .object({
    name: z
      .string()
      .regex(/^[-._a-zA-Z][-._a-zA-Z0-9]*$/, 'must be an environment variable name')
      .max(256),
    value: z.string().max(32_768),
  })
  .strict();

export const DEFAULT_RUNTIME_HTTP_PORT = 8081;
export const DEFAULT_RUNTIME_MODELS_PATH = '/mnt/models';

/** Built from the resource's own quantity and resource-list schemas (common/resource.ts), so the syntax is one. */
export function runtimeSchema<Q extends z.ZodType<string, string | number>, R extends z.ZodType>(quantity: Q, resourceList: R) {
  return z
    .object({
      /** The runtime's image, e.g. seldonio/mlserver or nvcr.io/nvidia/tritonserver. */
      image: z.string().min(1).max(512),
      /** Replaces the image's entrypoint. */
      command: z.array(z.string().max(4096)).max(64).optional(),
      args: z.array(z.string().max(4096)).max(256).optional(),
      env: z.array(envVarSchema).max(256).optional(),
      /** The V2 HTTP port it listens on inside the pod; the sidecar reaches it on 127.0.0.1. */
      httpPort: z.number().int().min(1).max(65535).default(DEFAULT_RUNTIME_HTTP_PORT),
      /** Its model repository folder: the volume it shares with the sidecar is mounted here in both containers. */
      modelsPath: z
        .string()
        .regex(/^\/[^\s]*$/, 'must be an absolute path')
        .max(1024)
        .default(DEFAULT_RUNTIME_MODELS_PATH),
      /** sizeLimit of that volume: the loaded models' folders, one copy each. */
      // prefault, not default: the default goes through the transform and so shows in the CRD schema.
      modelsSize: quantity.prefault('10Gi' as z.input<Q>),
      /** The runtime container's resources; GPU requests belong here, since the runtime runs the models. */
      resources: z.object({ requests: resourceList.optional(), limits: resourceList.optional() }).strict().default({}),
    })
    .strict()
    .refine((r) => r.httpPort !== REPLICA_PORT, { message: `httpPort must not be the replica's port ${REPLICA_PORT}`, path: ['httpPort'] })
    .meta({ 'x-kubernetes-validations': [{ rule: `self.httpPort != ${REPLICA_PORT}`, message: `httpPort must not be the replica's port ${REPLICA_PORT}` }] });
}
