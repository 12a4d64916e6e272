import { delimiter } from 'node:path';

/**
 * The folder `npm run install:cuda` prints: onnxruntime-gpu's core library and providers with
 * the NVIDIA libraries (docs/adr/0045-cuda-provider-from-wheels.md). Read by the `modelmux`
 * command before anything loads, so that the loader takes its libonnxruntime.so.1.
 */
export const CUDA_LIBS_ENV = 'MODELMUX_CUDA_LIBS';

/**
 * The environment to start this program again with, when a CUDA folder is configured and not yet
 * on the library path: glibc reads LD_LIBRARY_PATH only when a process starts. Undefined when
 * nothing is to be done (no folder, or the image already put it there).
 */
export function relaunchEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv | undefined {
  const folder = env[CUDA_LIBS_ENV];
  if (folder === undefined || folder === '') return undefined;
  const path = env.LD_LIBRARY_PATH ?? '';
  if (path.split(delimiter).includes(folder)) return undefined;
  return { ...env, LD_LIBRARY_PATH: path === '' ? folder : `${folder}${delimiter}${path}` };
}
