import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { wineModelBytes } from '../../../common/wine-model.js';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { inFlightAt } from '../../helpers/in-flight.js';
import { expectClose, expected, post, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(120_000);

/** How often the replica checks its loaded models against the store in these tests. */
const INTERVAL_MS = 1500;
/** A check, a HEAD, a download and a session on a busy two-core machine, on top of the interval. */
const SWAP_SLACK_MS = 2500;

let s3: S3Server;
let r: ReplicaProcess;
const rows = wineRows(3);

/** Three rows every time: the same kernels run each request, so equal weights give equal bits. */
async function answer(id: string, headers: Record<string, string> = {}): Promise<{ status: number; out: number[] }> {
  const a = await post(`${r.url}/v2/models/${id}/infer`, v2Body(rows), headers);
  return { status: a.status, out: a.status === 200 ? v2Outputs(a) : [] };
}

interface Sample {
  start: number;
  end: number;
  status: number;
  out: number[];
}

/** `clients` loops asking for `id` until `until()` says stop; every answer goes into `samples` as it comes. */
async function drive(id: string, clients: number, until: () => boolean, samples: Sample[]): Promise<void> {
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (!until()) {
        const start = performance.now();
        const a = await answer(id);
        samples.push({ start, end: performance.now(), ...a });
      }
    }),
  );
}

const metric = async (name: string): Promise<number> => (await r.metrics()).get(name) ?? 0;

beforeAll(async () => {
  s3 = await startS3Server();
  await s3.put('wine/hot/model.onnx', wineModelBytes('hot-v1'));
  await s3.put('wine/hot-v2/model.onnx', wineModelBytes('hot-v2'));
  r = await startReplica({
    args: ['--model-source', `s3://${s3.bucket}/wine`, '--s3-endpoint', s3.endpoint, '--max-models', '3', '--revalidate-loaded-ms', String(INTERVAL_MS), '--test-hooks', 'true'],
    env: s3.awsEnv,
  });
}, 600_000);

afterAll(async () => {
  await r?.stop();
  await s3?.stop();
});

describe('a loaded model replaced in the store', () => {
  it('switches within the interval under load, every answer all old or all new, the request in flight finishing on the old one', async () => {
    const before = await answer('hot');
    const after = await answer('hot-v2');
    expect([before.status, after.status]).toEqual([200, 200]);
    expectClose(before.out, expected('hot-v1', rows));
    expectClose(after.out, expected('hot-v2', rows));
    expect(before.out).not.toEqual(after.out);

    // Leases the old version now, runs 2.5 s later: long after the swap.
    const slow = answer('hot', { 'x-modelmux-test-delay-ms': '2500' }).then((a) => ({ ...a, end: performance.now() }));
    await inFlightAt(r, 1);
    let stop = false;
    const samples: Sample[] = [];
    const isNew = (s: Sample): boolean => s.out.join() === after.out.join();
    const load = drive('hot', 4, () => stop, samples);
    // The load answers before the upload, so the switch is seen from the old side.
    await eventually(() => expect(samples.length).toBeGreaterThan(0), 5000, 10);
    await s3.put('wine/hot/model.onnx', wineModelBytes('hot-v2'));
    const putAt = performance.now();
    // A second of answers after the first new one, or give up well past the interval.
    const deadline = putAt + INTERVAL_MS + SWAP_SLACK_MS + 5000;
    for (let seen: Sample | undefined; performance.now() < deadline && (seen === undefined || performance.now() < seen.end + 1000);) {
      await sleep(50);
      seen ??= samples.find(isNew);
    }
    stop = true;
    await load;
    const firstNew = samples.filter(isNew).sort((a, b) => a.end - b.end)[0];

    expect(samples.filter((s) => s.status !== 200)).toEqual([]);
    const other = samples.filter((s) => s.out.join() !== before.out.join() && s.out.join() !== after.out.join());
    expect(other).toEqual([]);
    expect(firstNew).toBeDefined();
    expect((firstNew?.end ?? Infinity) - putAt).toBeLessThan(INTERVAL_MS + SWAP_SLACK_MS);
    // Asked after an answer came from the new version: the old one is gone for good.
    const late = samples.filter((s) => s.start > (firstNew?.end ?? Infinity));
    expect(late.length).toBeGreaterThan(0);
    expect(late.filter((s) => !isNew(s))).toEqual([]);

    const held = await slow;
    expect(held.status).toBe(200);
    expect(held.end).toBeGreaterThan(firstNew?.end ?? Infinity);
    expect(held.out).toEqual(before.out);

    expect(await metric('modelmux_replica_model_swaps_total{result="success"}')).toBe(1);
    expect(await metric('modelmux_replica_model_revalidations_total{result="changed"}')).toBe(1);
    // The old version's session is let go once its last request, the slow one, is done.
    await eventually(async () => expect(await metric('modelmux_replica_model_releases_total')).toBeGreaterThanOrEqual(1), 5000, 25);
  });

  it('keeps serving the loaded version when the new upload is broken, and swaps once it is fixed', async () => {
    const now = (await answer('hot')).out;
    const swapsBefore = await metric('modelmux_replica_model_swaps_total{result="failure"}');
    await s3.put('wine/hot/model.onnx', new TextEncoder().encode('not an onnx model'));
    await eventually(async () => expect(await metric('modelmux_replica_model_swaps_total{result="failure"}')).toBeGreaterThan(swapsBefore), INTERVAL_MS + SWAP_SLACK_MS, 25);
    const during = await answer('hot');
    expect(during).toEqual({ status: 200, out: now });

    await s3.put('wine/hot/model.onnx', wineModelBytes('hot-v3'));
    await eventually(async () => expect((await answer('hot')).out).not.toEqual(now), INTERVAL_MS * 2 + SWAP_SLACK_MS, 25);
    expectClose((await answer('hot')).out, expected('hot-v3', rows));
  });
});
