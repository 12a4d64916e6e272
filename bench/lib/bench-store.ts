import { pathToFileURL } from 'node:url';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';
import { uploadModels } from './model-set.js';

/** Where a benchmark's pools read the generated models from, and how to reach it. */
export interface BenchStore {
  /** A pool's --model-source. */
  source: string;
  endpoint?: string;
  /** What a pool's processes need in their environment (S3 credentials). */
  env: Record<string, string>;
  /** The store's process, for its CPU; none for a folder. */
  pid: number | undefined;
  /** The S3 store itself, for more uploads and direct reads; none for a folder. */
  s3?: S3Server;
  stop(): Promise<void>;
}

/** SeaweedFS's S3 gateway with the models uploaded under `<prefix>/`, or the models' folder itself. */
export async function openBenchStore(kind: 's3' | 'file', modelDir: string, ids: readonly string[], log: (msg: string) => void, prefix = 'wine'): Promise<BenchStore> {
  if (kind === 'file') return { source: pathToFileURL(modelDir).href, env: {}, pid: undefined, stop: () => Promise.resolve() };
  // Room for forty volumes, not the tests' twenty: the scale run puts 10,000 models in this store.
  const s3 = await startS3Server({ bucket: 'models', startTimeoutMs: 120_000, maxVolumes: 40 });
  try {
    log(`SeaweedFS S3 at ${s3.endpoint}; uploading`);
    await uploadModels(modelDir, ids, (k, b) => s3.put(k, b), prefix);
  } catch (err) {
    await s3.stop();
    throw err;
  }
  return { source: `s3://models/${prefix}`, endpoint: s3.endpoint, env: s3.awsEnv, pid: s3.pid, s3, stop: () => s3.stop() };
}
