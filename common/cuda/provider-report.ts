import { z } from 'zod';

/**
 * What `modelmux doctor --json` prints, and the vocabulary a replica refusing `cuda` speaks.
 * The state codes are stable: CI and scripts match on them, the reason is for people.
 */
export const PROVIDER_STATES = ['ok', 'library_missing', 'driver_missing', 'no_device'] as const;

/** The driver's library: a GPU node (the NVIDIA container toolkit) supplies it, no install can. */
export const DRIVER_LIBRARY = 'libcuda.so.1';

export const libraryCheckSchema = z.object({
  file: z.string(),
  loaded: z.boolean(),
  /** The first dependency the loader could not find, when that is why it did not load. */
  missing: z.string().optional(),
  /** The loader's own words, when it did not load. */
  error: z.string().optional(),
});

export const providerStatusSchema = z.object({
  state: z.enum(PROVIDER_STATES),
  reason: z.string(),
});

export const gpuSchema = z.object({
  index: z.number().int().nonnegative(),
  name: z.string(),
  /** Where it was seen: nvidia-smi also gives memory and driver; the kernel module's folder only the model. */
  source: z.enum(['nvidia-smi', 'proc']),
  memoryMiB: z.number().nonnegative().optional(),
  driver: z.string().optional(),
});

export const doctorReportSchema = z.object({
  onnxruntime: z.object({
    version: z.string(),
    /** The core library the replica loads: onnxruntime-node's own, or the CUDA wheel's (MODELMUX_CUDA_LIBS). */
    library: z.string(),
  }),
  providers: z.object({
    cpu: providerStatusSchema,
    cuda: providerStatusSchema.extend({
      /** The folder of `npm run install:cuda`, when one is configured. */
      folder: z.string().optional(),
      libraries: z.array(libraryCheckSchema),
    }),
  }),
  gpus: z.array(gpuSchema),
});

export type ProviderState = (typeof PROVIDER_STATES)[number];
export type LibraryCheck = z.infer<typeof libraryCheckSchema>;
export type ProviderStatus = z.infer<typeof providerStatusSchema>;
export type Gpu = z.infer<typeof gpuSchema>;
export type DoctorReport = z.infer<typeof doctorReportSchema>;
