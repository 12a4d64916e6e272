import { z } from 'zod';
import { booleanString, parseConfig, type OptionSpecs, intString } from '../common/config.js';
import { createLogger } from '../common/log.js';
import { MAX_MODEL_ID_LENGTH } from '../common/model-id.js';
import { parseDestination, writeExampleModels, type ModelDestination, type S3Settings } from './example-models.js';
import { s3OptionSpecs, s3OptionsShape } from '../common/s3-options.js';

const SUMMARY =
  'Write the deterministic example models (a small wine-quality MLP per id) as <out>/<ID>/model.onnx,\n' + 'into a folder or an S3 bucket. Models already present with the right size are left alone.';

const schema = z.object({
  out: z
    .string()
    .min(1)
    .transform((raw, ctx) => {
      const dest = parseDestination(raw, process.cwd());
      if ('error' in dest) {
        ctx.addIssue({ code: 'custom', message: dest.error });
        return z.NEVER;
      }
      return dest;
    }),
  count: intString(1, 100000).default(20),
  archives: booleanString.default(false),
  sizeMb: z.coerce.number().positive().max(4096).optional(),
  prefix: z
    .string()
    .max(MAX_MODEL_ID_LENGTH - 6)
    .regex(/^[A-Za-z0-9._~@:+=-]*$/, 'may hold only letters, digits and . _ ~ @ : + = -')
    .default('wine-'),
  ...s3OptionsShape,
});

const specs: OptionSpecs<typeof schema.shape> = {
  out: { flag: 'out', env: 'MODELMUX_MODELS_OUT', help: 'Destination: a folder, file:///dir or s3://bucket[/prefix]. Required.' },
  count: { flag: 'count', env: 'MODELMUX_MODELS_COUNT', help: 'How many models (ids <prefix>0 … <prefix>N-1). Default 20.' },
  sizeMb: { flag: 'size-mb', env: 'MODELMUX_MODELS_SIZE_MB', help: 'Approximate size of each model file in MiB (wider hidden layer). Default: about 1 KB.' },
  prefix: { flag: 'prefix', env: 'MODELMUX_MODELS_PREFIX', help: 'Model id prefix. Default "wine-".' },
  archives: {
    flag: 'archives',
    env: 'MODELMUX_MODELS_ARCHIVES',
    help: 'Write the SageMaker multi-model layout instead: <prefix>N.tar.gz, N copies of one model.tar.gz holding model <prefix>0 (docs/sagemaker.md).',
  },
  ...s3OptionSpecs,
};

export function parseModelsConfig(argv: readonly string[], env: NodeJS.ProcessEnv): z.infer<typeof schema> {
  return parseConfig('models', SUMMARY, schema, specs, argv, env);
}

export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const config = parseModelsConfig(argv, env);
  const s3: S3Settings = {
    region: config.s3Region,
    ...(config.s3Endpoint !== undefined ? { endpoint: config.s3Endpoint } : {}),
    ...(config.s3ForcePathStyle !== undefined ? { forcePathStyle: config.s3ForcePathStyle } : {}),
  };
  const log = createLogger({ component: 'models' });
  const report = await writeExampleModels(
    config.out,
    { prefix: config.prefix, count: config.count, archives: config.archives, ...(config.sizeMb !== undefined ? { bytesPerModel: Math.round(config.sizeMb * 1024 * 1024) } : {}) },
    s3,
  );
  log.info('example models ready', { out: describeDestination(config.out), written: report.written.length, skipped: report.skipped.length });
}

function describeDestination(dest: ModelDestination): string {
  return dest.kind === 'file' ? dest.dir : `s3://${dest.bucket}/${dest.prefix}`;
}
