import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import ort from 'onnxruntime-node';
import { z } from 'zod';
import { booleanString, parseConfig, type OptionSpecs } from '../common/config.js';
import { CUDA_LIBS_ENV } from '../common/cuda/cuda-libraries.js';
import { diagnoseCuda } from '../common/cuda/diagnose.js';
import type { DoctorReport, ProviderStatus } from '../common/cuda/provider-report.js';
import { probeExecutionProvider } from '../replica/onnx/onnx-runtime.js';
import { formatDoctorReport } from './doctor-text.js';

const SUMMARY =
  'Say what can run here: the onnxruntime version and the core library in use, each execution\n' +
  "provider's state (ok, library_missing, driver_missing, no_device, with the reason), the CUDA\n" +
  `libraries of ${CUDA_LIBS_ENV} and whether each loads, and the GPUs this machine shows.`;

const schema = z.object({
  json: booleanString.default(false),
});

const specs: OptionSpecs<typeof schema.shape> = {
  json: { flag: 'json', help: 'Print the report as JSON (the schema of common/cuda/provider-report.ts) instead of text. Default false.' },
};

export function parseDoctorConfig(argv: readonly string[], env: NodeJS.ProcessEnv): z.infer<typeof schema> {
  return parseConfig('doctor', SUMMARY, schema, specs, argv, env);
}

async function cpuStatus(): Promise<ProviderStatus> {
  try {
    await probeExecutionProvider('cpu');
    return { state: 'ok', reason: 'a CPU session runs' };
  } catch (err) {
    return { state: 'library_missing', reason: `onnxruntime does not run a CPU session: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** The core library the loader gave onnxruntime-node's binding: the CUDA folder's when configured (LD_LIBRARY_PATH). */
function coreLibrary(folder: string | undefined): string {
  if (folder !== undefined) return join(folder, 'libonnxruntime.so.1');
  const binding = createRequire(import.meta.url).resolve('onnxruntime-node/package.json');
  return join(dirname(binding), 'bin', 'napi-v6', process.platform, process.arch, 'libonnxruntime.so.1');
}

/** `modelmux doctor`: a report, exit 0 whatever it finds; its JSON's states are for scripts and CI. */
export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const config = parseDoctorConfig(argv, env);
  const folder = env[CUDA_LIBS_ENV] === '' ? undefined : env[CUDA_LIBS_ENV];
  const { gpus, ...cuda } = await diagnoseCuda(folder, () => probeExecutionProvider('cuda'));
  const report: DoctorReport = {
    onnxruntime: { version: ort.env.versions.node ?? ort.env.versions.common, library: coreLibrary(folder) },
    providers: { cpu: await cpuStatus(), cuda },
    gpus,
  };
  process.stdout.write(config.json ? `${JSON.stringify(report, null, 2)}\n` : formatDoctorReport(report));
}
