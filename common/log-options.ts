import { z } from 'zod';
import type { OptionSpec } from './config.js';
import { LOG_LEVELS } from './log.js';
import { REPLICA_ENV } from './replica-env.js';

/** The log level every long-running program takes, under one flag and one variable. */
export const logOptionsShape = {
  logLevel: z.enum(LOG_LEVELS).default('info'),
};

export const logOptionSpecs: Record<keyof typeof logOptionsShape, OptionSpec> = {
  logLevel: {
    flag: 'log-level',
    env: REPLICA_ENV.logLevel,
    help: "Lowest level of the log lines written: info, warn or error (default info). The router's access line of a request is info, of a failed request a warning.",
  },
};
