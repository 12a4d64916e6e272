import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { WINE_INPUT } from '../../common/wine-model.js';
import { eventually } from '../../harness/eventually.js';
import { startLocal, type LocalProcess } from '../helpers/local-process.js';
import { bucketListings, METADATA_LISTINGS, FLEET_INFER_BODY, FLEET_SIZE, FLEET_WIDTHS, fleetId, fleetSample, fleetWidth, uploadFleet, wrongAnswers } from '../helpers/model-fleet.js';
import { parsePrometheus } from '../../harness/modelmux-process.js';
import { startS3Server, type S3Server } from '../../harness/s3-server.js';

/**
 * A store at scale (issue 37), served by `modelmux local`: loading a model must cost the store a
 * GET or HEAD of its own key, never a listing of the bucket, and metadata of a model never asked
 * for loads that model alone.
 */

const PREFIX = 'fleet';

async function successfulLoads(local: LocalProcess): Promise<number> {
  let n = 0;
  for (const url of local.replicaUrls()) n += parsePrometheus(await (await fetch(`${url}/metrics`)).text()).get('modelmux_replica_model_loads_total{result="success"}') ?? 0;
  return n;
}

describe('a store of 10,000 models of five graphs, served by modelmux local', () => {
  let s3: S3Server;
  let local: LocalProcess | undefined;

  beforeAll(async () => {
    s3 = await startS3Server({ metrics: true });
    const ms = await uploadFleet(s3, PREFIX);
    process.stdout.write(`uploaded ${FLEET_SIZE} models in ${ms} ms\n`);
    const env = { ...process.env, ...s3.awsEnv, MODELMUX_S3_ENDPOINT: s3.endpoint };
    local = await startLocal(['--port', '0', '--replicas', '2', '--model-source', `s3://${s3.bucket}/${PREFIX}`], env, 150_000);
  }, 240_000);

  afterAll(async () => {
    await local?.stop();
    await s3?.stop();
  }, 60_000);

  it('answers a sample spread over the ids and every graph correctly, and lists the bucket for none of them', async () => {
    const listedBefore = await bucketListings(s3);
    const sample = fleetSample(60);
    expect([...new Set(sample.map(fleetWidth))].sort((a, b) => a - b)).toEqual([...FLEET_WIDTHS]);
    expect(Math.max(...sample)).toBeGreaterThan(FLEET_SIZE * 0.9);
    expect(await wrongAnswers(local?.route() ?? '', sample)).toEqual([]);
    expect(await bucketListings(s3)).toBe(listedBefore);
  }, 120_000);

  it('answers metadata of a model never asked for while loading at most that one model and listing only its versions', async () => {
    const id = fleetId(FLEET_SIZE - 2);
    const loadsBefore = await successfulLoads(local as LocalProcess);
    // The earlier test loaded its sample: the count read here is the real one.
    expect(loadsBefore).toBeGreaterThanOrEqual(60);
    const listedBefore = await bucketListings(s3);
    const res = await fetch(`${local?.route() ?? ''}/v2/models/${id}`);
    const body = (await res.json()) as { name?: string; inputs?: { name: string }[] };
    expect({ status: res.status, name: body.name, input: body.inputs?.[0]?.name }).toEqual({ status: 200, name: id, input: WINE_INPUT });
    const loaded = (await successfulLoads(local as LocalProcess)) - loadsBefore;
    process.stdout.write(`metadata of a never-loaded model: ${loaded} load(s)\n`);
    expect(loaded).toBeLessThanOrEqual(1);
    expect((await bucketListings(s3)) - listedBefore).toBeLessThanOrEqual(METADATA_LISTINGS);
  }, 60_000);

  it('answers model_not_found for an id past the end of the store without listing it', async () => {
    const listedBefore = await bucketListings(s3);
    const res = await fetch(`${local?.route() ?? ''}/v2/models/${fleetId(FLEET_SIZE)}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: FLEET_INFER_BODY });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: 'model_not_found' });
    expect(await bucketListings(s3)).toBe(listedBefore);
    // The count is live: a listing of the bucket shows in it.
    await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `${PREFIX}/`, MaxKeys: 1 }));
    await eventually(async () => expect(await bucketListings(s3)).toBe(listedBefore + 1), 5000, 50);
  }, 60_000);
});
