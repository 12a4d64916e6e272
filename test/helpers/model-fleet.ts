import { SAMPLE_WINE, WINE_INPUT, wineForward, wineModelBytes, wineWeights } from '../../common/wine-model.js';
import { parsePrometheus } from '../../harness/modelmux-process.js';
import type { S3Server } from '../../harness/s3-server.js';

/**
 * A store at scale for the tests of issue 37: 10,000 models of five graphs (the wine MLP at five
 * hidden widths, each file well under 1 KB) in a real S3 server, with each one's expected output.
 */

export const FLEET_SIZE = 10_000;
/** Hidden widths: each makes a graph of its own shape. */
export const FLEET_WIDTHS = [1, 2, 3, 5, 8] as const;
const UPLOAD_CONCURRENCY = 32;

export const fleetId = (i: number): string => `m-${String(i).padStart(5, '0')}`;
export const fleetWidth = (i: number): number => FLEET_WIDTHS[i % FLEET_WIDTHS.length] ?? 1;

/** Uploads the fleet under `prefix`, 32 at a time; answers how long it took. */
export async function uploadFleet(s3: S3Server, prefix: string): Promise<number> {
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: UPLOAD_CONCURRENCY }, async () => {
      while (next < FLEET_SIZE) {
        const i = next++;
        await s3.put(`${prefix}/${fleetId(i)}/model.onnx`, wineModelBytes(fleetId(i), fleetWidth(i)));
      }
    }),
  );
  return Date.now() - started;
}

/**
 * `count` indices across the whole range: each step is a whole number of width cycles and the
 * k-th index is moved k places into its cycle, so the sample goes through every graph in turn.
 */
export function fleetSample(count: number): number[] {
  const step = FLEET_WIDTHS.length * Math.floor(FLEET_SIZE / count / FLEET_WIDTHS.length);
  return Array.from({ length: count }, (_, k) => k * step + (k % FLEET_WIDTHS.length));
}

/** A V2 infer body of one row, the seed example's wine. */
export const FLEET_INFER_BODY = JSON.stringify({ inputs: [{ name: WINE_INPUT, shape: [1, SAMPLE_WINE.length], datatype: 'FP32', data: SAMPLE_WINE }] });

/** Sends FLEET_INFER_BODY for each index of `sample` to `<base>/v2/models/<id>/infer`; answers what was wrong. */
export async function wrongAnswers(base: string, sample: readonly number[]): Promise<string[]> {
  const wrong: string[] = [];
  for (const i of sample) {
    const id = fleetId(i);
    const res = await fetch(`${base}/v2/models/${id}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: FLEET_INFER_BODY });
    const body = (await res.json()) as { outputs?: { data: number[] }[] };
    const got = body.outputs?.[0]?.data[0] ?? NaN;
    const want = wineForward(wineWeights(id, fleetWidth(i)), [SAMPLE_WINE])[0] ?? NaN;
    if (res.status !== 200 || !(Math.abs(got - want) < 1e-4)) wrong.push(`${id}: ${res.status} ${JSON.stringify(body)} (want ${want})`);
  }
  return wrong;
}

/**
 * Listings one metadata request may make: one of the model's own prefix, for its versions
 * (ADR 0033), where a scan of a 10,000-model bucket would take ten pages or more.
 */
export const METADATA_LISTINGS = 1;

/** ListObjects calls SeaweedFS answered for the bucket, whatever their status (start it with `metrics`). */
export async function bucketListings(s3: S3Server): Promise<number> {
  const metrics = parsePrometheus(await (await fetch(s3.metricsUrl ?? '')).text());
  let n = 0;
  for (const [key, value] of metrics) {
    if (key.startsWith('SeaweedFS_s3_request_total{') && key.includes(`bucket="${s3.bucket}"`) && key.includes('type="LIST"')) n += value;
  }
  return n;
}
