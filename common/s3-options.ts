import { z } from 'zod';
import { booleanString, type OptionSpec } from './config.js';
import { REPLICA_ENV } from './replica-env.js';

/**
 * The S3 settings every program that talks to a store takes, with the same flags and the
 * replica's environment names, so one set of variables configures local mode, `models` and
 * the replicas alike. Credentials are never flags: they come from the standard AWS chain.
 */
export const s3OptionsShape = {
  s3Endpoint: z.url().optional(),
  s3Region: z.string().min(1).max(64).default('us-east-1'),
  s3ForcePathStyle: booleanString.optional(),
};

export const s3OptionSpecs: Record<keyof typeof s3OptionsShape, OptionSpec> = {
  s3Endpoint: { flag: 's3-endpoint', env: REPLICA_ENV.s3Endpoint, help: 'S3-compatible endpoint URL (MinIO, SeaweedFS, …); AWS when unset. Credentials come from the standard AWS chain.' },
  s3Region: { flag: 's3-region', env: REPLICA_ENV.s3Region, help: 'S3 region (default us-east-1).' },
  s3ForcePathStyle: { flag: 's3-force-path-style', env: REPLICA_ENV.s3ForcePathStyle, help: 'Path-style S3 addressing (default: true when an endpoint is set).' },
};
