import { GetObjectCommand } from '@aws-sdk/client-s3';
import * as ort from 'onnxruntime-node';
import { HEADER_RAY_MODEL_ID } from '../../common/names.js';
import { SAMPLE_WINE, WINE_INPUT } from '../../common/wine-model.js';
import type { S3Server } from '../../harness/s3-server.js';
import { seededRandom } from '../simulator/rng.js';
import { globalLruMisses } from './global-lru.js';
import { ensureModelFiles, modelDirFor, uploadModels } from './model-set.js';
import { startModelmuxPool } from './modelmux-pool.js';
import { runStep, type StepResult } from './open-loop.js';
import { summarize, type LatencySummary } from './stats.js';
import { idSampler, modelIds } from './traffic.js';

/**
 * The scale run of bench:mux: many small models in SeaweedFS, a pool of several replicas behind
 * two routers, Zipf(1.0) traffic at a fixed open-loop rate. It measures what only scale shows:
 * model loads per 1000 requests against one ideal LRU over all the pool's slots (the floor no
 * placement beats), and a cold model's first answer against what the bare parts cost: one S3
 * GET of the file plus one onnxruntime session made from it, in this process.
 */
export interface ScaleOptions {
  models: number;
  modelBytes: number;
  replicas: number;
  routers: number;
  maxModels: number;
  maxOngoingRequests: number;
  rateRps: number;
  warmupRequests: number;
  measuredRequests: number;
  coldSamples: number;
  logLevel: string;
  seed: number;
}

export interface ScaleResult {
  options: ScaleOptions;
  uploadSeconds: number;
  measured: Omit<StepResult, 'sequence'>;
  loads: number;
  loadsPer1000: number;
  idealLoadsPer1000: number;
  /** modelmux's loads over the ideal's. */
  loadsVsIdeal: number;
  downloadsPer1000: number;
  coldFirstAnswer: LatencySummary;
  bareGetPlusSession: LatencySummary;
}

const PREFIX = 'scale';
const ROW = [...SAMPLE_WINE];

/** `count` ids that `seen` never asked for, from the unpopular end of a Zipf order (the last ids). */
function unseen(ids: readonly string[], seen: ReadonlySet<string>, count: number, skip = 0): string[] {
  return ids.filter((id) => !seen.has(id)).slice(-(count + skip), skip === 0 ? undefined : -skip);
}

async function timedFirstAnswer(url: string, id: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', [HEADER_RAY_MODEL_ID]: id }, body: JSON.stringify({ instances: [ROW] }) });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`cold request for ${id}: HTTP ${res.status}`);
  return performance.now() - t0;
}

/** One GET of the file from the store, one session made from the bytes and one row run: the parts of a cold load, bare. */
async function bareGetPlusSession(s3: S3Server, id: string): Promise<number> {
  const t0 = performance.now();
  const got = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `${PREFIX}/${id}/model.onnx` }));
  const bytes = await got.Body?.transformToByteArray();
  if (!bytes) throw new Error(`no body for ${id}`);
  // The replica's session options (replica/onnx/onnx-runtime.ts): one thread, basic graph optimisation.
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'basic', executionMode: 'sequential' });
  await session.run({ [WINE_INPUT]: new ort.Tensor('float32', Float32Array.from(ROW), [1, ROW.length]) });
  const ms = performance.now() - t0;
  await session.release();
  return ms;
}

export async function scaleRun(repoRoot: string, s3: S3Server, o: ScaleOptions, log: (msg: string) => void): Promise<ScaleResult> {
  const ids = modelIds(o.models);
  const dir = modelDirFor(o.modelBytes);
  const made = await ensureModelFiles(dir, ids, o.modelBytes);
  log(`scale: ${o.models} models of ${o.modelBytes} bytes ready (${made.written} written); uploading`);
  const t0 = performance.now();
  await uploadModels(dir, ids, (k, b) => s3.put(k, b), PREFIX, 16);
  const uploadSeconds = (performance.now() - t0) / 1000;
  log(`scale: uploaded in ${uploadSeconds.toFixed(0)} s; starting ${o.replicas} replicas and ${o.routers} routers`);
  const pool = await startModelmuxPool(repoRoot, {
    replicas: o.replicas,
    routers: o.routers,
    maxModels: o.maxModels,
    maxOngoingRequests: o.maxOngoingRequests,
    modelSource: `s3://${s3.bucket}/${PREFIX}`,
    s3Endpoint: s3.endpoint,
    routePrefix: '/scale',
    logLevel: o.logLevel,
    env: s3.awsEnv,
  });
  try {
    const nextModel = idSampler('zipf', ids, o.seed);
    const step = (requests: number, seed: number): Promise<StepResult> =>
      runStep({
        urls: pool.routerUrls,
        rateRps: o.rateRps,
        warmupMs: 0,
        measuredMs: (1000 * requests) / o.rateRps,
        // Loads are what this run counts: a slow step is reported, never cut short.
        p99LimitMs: Number.POSITIVE_INFINITY,
        random: seededRandom(seed),
        nextModel,
        body: JSON.stringify({ instances: [ROW] }),
        timeoutMs: 30_000,
        connections: 64,
      });
    const warm = await step(o.warmupRequests, o.seed + 1);
    log(`scale: warm-up ${warm.requests} requests, ${warm.ok} ok`);
    const before = await pool.loads();
    const run = await step(o.measuredRequests, o.seed + 2);
    const after = await pool.loads();
    const history = [...warm.sequence, ...run.sequence];
    const ideal = globalLruMisses(history, o.replicas * o.maxModels, warm.sequence.length);
    const loads = after.count - before.count;
    const loadsPer1000 = (1000 * loads) / Math.max(1, run.requests);
    const idealLoadsPer1000 = (1000 * ideal.misses) / Math.max(1, ideal.requests);
    log(`scale: ${run.requests} requests, ${run.ok} ok, p99 ${run.latency.p99Ms.toFixed(1)} ms, ${loads} loads (ideal ${ideal.misses})`);

    // Cold models: never asked for by the traffic above, one at a time, the routers in turn.
    const seen = new Set(history);
    const cold: number[] = [];
    for (const [i, id] of unseen(ids, seen, o.coldSamples).entries()) cold.push(await timedFirstAnswer(pool.routerUrls[i % pool.routerUrls.length] as string, id));
    const bare: number[] = [];
    for (const id of unseen(ids, seen, o.coldSamples, o.coldSamples)) bare.push(await bareGetPlusSession(s3, id));
    const { sequence: _s, ...measured } = run;
    return {
      options: o,
      uploadSeconds,
      measured,
      loads,
      loadsPer1000,
      idealLoadsPer1000,
      loadsVsIdeal: idealLoadsPer1000 === 0 ? Number.NaN : loadsPer1000 / idealLoadsPer1000,
      downloadsPer1000: (1000 * (after.downloads - before.downloads)) / Math.max(1, run.requests),
      coldFirstAnswer: summarize(cold),
      bareGetPlusSession: summarize(bare),
    };
  } finally {
    await pool.stop();
  }
}
