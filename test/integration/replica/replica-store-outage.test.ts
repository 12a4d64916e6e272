import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { jest } from '@jest/globals';
import { wineModelBytes } from '../../../common/wine-model.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startS3Server, type S3Server } from '../../../harness/s3-server.js';
import { expectClose, expected, get, post, v2Body, v2Outputs, wineRows } from './wine-fixtures.js';

jest.setTimeout(180_000);

const rows = wineRows(1);
const replicas: ReplicaProcess[] = [];

async function timed<T>(work: Promise<T>): Promise<{ ms: number; value: T }> {
  const start = performance.now();
  const value = await work;
  return { ms: performance.now() - start, value };
}

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
});

describe('a store that accepts connections and never answers', () => {
  let hole: Server;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    hole = createServer((s) => {
      sockets.push(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => hole.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => hole.close(() => resolve()));
  });

  it('fails the load with store_unavailable after two silent tries instead of holding it', async () => {
    const endpoint = `http://127.0.0.1:${(hole.address() as AddressInfo).port}`;
    const r = await startReplica({
      args: ['--model-source', 's3://models/wine', '--s3-endpoint', endpoint, '--store-timeout-ms', '1000'],
      env: { AWS_ACCESS_KEY_ID: 'k', AWS_SECRET_ACCESS_KEY: 's', AWS_REGION: 'us-east-1' },
    });
    replicas.push(r);
    const { ms, value } = await timed(post(`${r.url}/v2/models/m1/infer`, v2Body(rows)));
    expect({ status: value.status, error: value.body.error }).toEqual({ status: 503, error: 'store_unavailable' });
    expect(String(value.body.message)).toMatch(/timed out after 1000 ms of inactivity/);
    // Two tries of a second each, the SDK's backoff between them, and the replica's own work.
    expect(ms).toBeLessThan(5000);
    expect(sockets).toHaveLength(2);
    // Nothing is left loading: the next request asks the store again rather than wait on a dead load.
    expect((await get(`${r.url}/models`)).body.loading).toEqual([]);
  });
});

describe('the first cold load after an S3 store outage', () => {
  let s3: S3Server;

  beforeAll(async () => {
    s3 = await startS3Server();
    for (const id of ['before', 'during', 'after', 'later']) await s3.put(`wine/${id}/model.onnx`, wineModelBytes(id));
  }, 600_000);

  afterAll(async () => {
    await s3?.stop();
  });

  it('fails at once while the store is down, then waits no longer than a new client does once it is back', async () => {
    // A store timeout longer than SeaweedFS's recovery can take on a loaded machine: this test
    // compares waits, and the default (10 s a try) could end the load before the store is back.
    const r = await startReplica({ args: ['--model-source', `s3://${s3.bucket}/wine`, '--s3-endpoint', s3.endpoint, '--store-timeout-ms', '60000'], env: s3.awsEnv });
    replicas.push(r);
    const infer = (id: string) => timed(post(`${r.url}/v2/models/${id}/infer`, v2Body(rows)));
    // Leaves pooled keep-alive connections to the store in the replica's S3 client.
    expect((await infer('before')).value.status).toBe(200);

    await s3.interrupt();
    const during = await infer('during');
    expect({ status: during.value.status, error: during.value.body.error }).toEqual({ status: 503, error: 'store_unavailable' });
    expect(during.ms).toBeLessThan(2000);

    await s3.resume();
    // SeaweedFS answers HEADs at once but holds GETs until its master is raft leader again and
    // its volume server has reported in: some seconds during which any client waits. A client
    // made now, with no pooled connection and no retry history, is the yardstick.
    const fresh = new S3Client({ endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
    try {
      const [load, yardstick] = await Promise.all([
        infer('after'),
        timed((async () => (await fresh.send(new GetObjectCommand({ Bucket: s3.bucket, Key: 'wine/later/model.onnx' }))).Body?.transformToByteArray())()),
      ]);
      expect(load.value.status).toBe(200);
      expectClose(v2Outputs(load.value), expected('after', rows));
      expect(yardstick.value?.length).toBeGreaterThan(0);
      expect(load.ms).toBeLessThan(yardstick.ms + 1000);
    } finally {
      fresh.destroy();
    }
    const next = await infer('later');
    expect(next.value.status).toBe(200);
    expect(next.ms).toBeLessThan(1000);
  });
});
