import { readFile, rm } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { identityInfer, inputsBomb } from '../../helpers/grpc-messages.js';
import { modelFolder } from '../../helpers/wine-folder.js';
import { framed, RawGrpcConnection, type RawAnswer } from '../../../harness/raw-grpc-client.js';

// Issue 47: the replica's gRPC port held to the HTTP/1.1 side's bounds, driven at the frame
// level (harness/raw-grpc-client.ts) against a real replica process.

jest.setTimeout(120_000);

const INVALID_ARGUMENT = 3;
const DEADLINE_EXCEEDED = 4;
const RESOURCE_EXHAUSTED = 8;
const OK = 0;

let models: string;
const started: ReplicaProcess[] = [];
const connections: RawGrpcConnection[] = [];

async function replica(args: string[] = []): Promise<ReplicaProcess> {
  const r = await startReplica({ args: ['--model-source', `file://${models}`, ...args] });
  started.push(r);
  return r;
}

async function connect(r: ReplicaProcess, o: Parameters<typeof RawGrpcConnection.open>[1] = {}): Promise<RawGrpcConnection> {
  const c = await RawGrpcConnection.open(r.grpcAddress as string, o);
  connections.push(c);
  return c;
}

/** The process's peak resident memory (VmHWM), in bytes. */
async function peakRss(pid: number): Promise<number> {
  const m = /VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1]) * 1024;
}

const metric = async (r: ReplicaProcess, key: string): Promise<number> => (await r.metrics()).get(key) ?? 0;

beforeAll(async () => {
  models = await modelFolder('grpc-hostile-', { identity: identityModel('float32') });
});

afterEach(async () => {
  for (const c of connections.splice(0)) c.close();
  await Promise.all(started.splice(0).map((p) => p.stop(5000)));
});

afterAll(async () => {
  await rm(models, { recursive: true, force: true });
});

describe('the replica’s gRPC port against hostile clients', () => {
  it('refuses two million empty inputs INVALID_ARGUMENT without building them: its peak memory barely moves', async () => {
    const r = await replica();
    const c = await connect(r);
    // Warm: the model loaded and one call served, so the peak before is the serving process's.
    expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    const before = await peakRss(r.pid);
    const a = await c.call('ModelInfer', framed(inputsBomb('identity'))).answer;
    expect(a).toMatchObject({ grpcStatus: INVALID_ARGUMENT, code: 'invalid_request' });
    expect(a.grpcMessage).toMatch(/more than 64 inputs/);
    // A decode of every entry took 0.7–0.9 GB here (issue 47); the message itself is 4 MB.
    expect((await peakRss(r.pid)) - before).toBeLessThan(100 * 1024 ** 2);
    expect((await c.call('ModelInfer', framed(identityInfer(2))).answer).grpcStatus).toBe(OK);
  });

  it('answers a message its decoder would choke on INVALID_ARGUMENT, not INTERNAL', async () => {
    const r = await replica();
    const c = await connect(r);
    // A parameters entry with no value: protobufjs decodes it as null and then fails to read it.
    const noValue = Buffer.concat([identityInfer(1), Buffer.from([0x22, 0x03, 0x0a, 0x01, 0x70])]);
    const a = await c.call('ModelInfer', framed(noValue)).answer;
    expect(a).toMatchObject({ grpcStatus: INVALID_ARGUMENT, code: 'invalid_request' });
    expect(a.grpcMessage).toMatch(/has no value/);
    const cut = await c.call('ModelInfer', framed(identityInfer(1).subarray(0, 20))).answer;
    expect(cut).toMatchObject({ grpcStatus: INVALID_ARGUMENT, code: 'invalid_request' });
  });

  it('ends a call whose message stalls after --body-idle-timeout-ms, and one that trickles past --body-timeout-ms', async () => {
    const r = await replica(['--body-idle-timeout-ms', '800', '--body-timeout-ms', '2500']);
    const c = await connect(r);
    // Issue 47's call: 6 bytes into a 1005-byte message, then nothing (open after 130 s before).
    const stalled = c.call('ModelInfer', Buffer.concat([framed(Buffer.alloc(1000)).subarray(0, 5), Buffer.from([0x0a])]), { end: false });
    const idle = await stalled.answer;
    expect(idle).toMatchObject({ grpcStatus: DEADLINE_EXCEEDED, code: 'request_timeout' });
    expect(idle.ms).toBeLessThan(5000);
    const trickle = c.call('ModelInfer', framed(Buffer.alloc(1000)).subarray(0, 5), { end: false });
    const timer = setInterval(() => trickle.stream.write(Buffer.from([0x00])), 300);
    const total = await trickle.answer;
    clearInterval(timer);
    expect(total).toMatchObject({ grpcStatus: DEADLINE_EXCEEDED, code: 'request_timeout' });
    expect(total.ms).toBeGreaterThanOrEqual(2400);
    expect(await metric(r, 'modelmux_replica_grpc_bounded_total{reason="message_idle"}')).toBe(1);
    expect(await metric(r, 'modelmux_replica_grpc_bounded_total{reason="message_total"}')).toBe(1);
  });

  it('counts half-sent messages in --grpc-max-buffered-bytes: past it RESOURCE_EXHAUSTED buffer_full, and the bytes come back', async () => {
    const r = await replica(['--grpc-max-buffered-bytes', '3Mi']);
    const c = await connect(r);
    const MiB = 1024 ** 2;
    const partial = (sent: number) => c.call('ModelInfer', framed(Buffer.alloc(2 * MiB)).subarray(0, sent), { end: false });
    const held = [partial(MiB), partial(MiB), partial(MiB - 64 * 1024)];
    // Each is a third of the budget; one more half MiB does not fit.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const over = await partial(MiB / 2).answer;
    expect(over).toMatchObject({ grpcStatus: RESOURCE_EXHAUSTED, code: 'buffer_full' });
    for (const h of held) h.stream.close();
    await Promise.all(held.map((h) => h.answer));
    expect((await c.call('ModelInfer', framed(identityInfer(20_000))).answer).grpcStatus).toBe(OK);
    expect(await metric(r, 'modelmux_replica_grpc_bounded_total{reason="buffer_full"}')).toBe(1);
  });

  it('closes a connection past --max-connections at once', async () => {
    const r = await replica(['--max-connections', '2']);
    const kept = [await connect(r), await connect(r)];
    const refused = RawGrpcConnection.open(r.grpcAddress as string).then(
      (c) => (connections.push(c), c.closed.then(() => 'closed')),
      () => 'refused',
    );
    expect(['closed', 'refused']).toContain(await refused);
    for (const c of kept) expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    expect(await metric(r, 'modelmux_replica_grpc_bounded_total{reason="connections"}')).toBe(1);
  });

  it('resets an answer its client never takes after --write-timeout-ms', async () => {
    const r = await replica(['--write-timeout-ms', '800']);
    // Window 1, never opened: the answer (1 MiB) cannot move.
    const c = await connect(r, { settings: { initialWindowSize: 1 } });
    const a: RawAnswer = await c.call('ModelInfer', framed(identityInfer(87_382)), { read: false }).answer;
    expect(a.grpcStatus).toBeUndefined();
    expect(a.rstCode).toBe(8);
    expect(await metric(r, 'modelmux_replica_grpc_bounded_total{reason="write"}')).toBe(1);
    const fresh = await connect(r);
    expect((await fresh.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
  });
});
