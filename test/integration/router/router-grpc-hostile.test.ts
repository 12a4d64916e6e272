import { rm } from 'node:fs/promises';
import { constants } from 'node:http2';
import { jest } from '@jest/globals';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { identityInfer, inputsBomb } from '../../helpers/grpc-messages.js';
import { modelFolder } from '../../helpers/wine-folder.js';
import { framed, RawGrpcConnection } from '../../../harness/raw-grpc-client.js';

// Issue 47: the router's gRPC port held to its HTTP/1.1 side's bounds — decode cost, the byte
// budget, message and write timeouts, the reset budget — driven at the frame level against
// real router and replica processes.

jest.setTimeout(180_000);

const INVALID_ARGUMENT = 3;
const DEADLINE_EXCEEDED = 4;
const OK = 0;
const MiB = 1024 ** 2;
/** Another client address to the router's per-client bounds than the well-behaved clients' 127.0.0.1. */
const ATTACKER = '127.0.0.3';

let models: string;
const started: { stop(graceMs?: number): Promise<number | null> }[] = [];
const connections: RawGrpcConnection[] = [];

async function pool(routerArgs: string[] = []): Promise<{ rt: RouterProcess; rs: ReplicaProcess[] }> {
  const rs = await Promise.all([0, 1].map(() => startReplica({ args: ['--model-source', `file://${models}`] })));
  started.push(...rs);
  const urls = rs.map((r) => `${r.url}?grpc-port=${(r.grpcAddress ?? '').split(':')[1]}`);
  const rt = await startRouter(['--routes', `/w=${urls.join(',')}`, '--poll-interval-ms', '200', ...routerArgs]);
  started.push(rt);
  return { rt, rs };
}

async function connect(address: string, o: Parameters<typeof RawGrpcConnection.open>[1] = {}): Promise<RawGrpcConnection> {
  const c = await RawGrpcConnection.open(address, o);
  connections.push(c);
  return c;
}

/** ModelInfer calls the replicas were asked, whatever their answer. */
async function replicaCalls(rs: readonly ReplicaProcess[]): Promise<number> {
  let n = 0;
  for (const r of rs) for (const [k, v] of await r.metrics()) if (k.startsWith('modelmux_replica_grpc_requests_total{method="ModelInfer"')) n += v;
  return n;
}

/** Calls from `clients` well-behaved clients in a loop until `stop` resolves; the statuses they got. */
async function goodTraffic(address: string, clients: number, stop: Promise<unknown>): Promise<(number | undefined)[]> {
  let running = true;
  void stop.finally(() => (running = false));
  const statuses: (number | undefined)[] = [];
  await Promise.all(
    Array.from({ length: clients }, async () => {
      const c = await connect(address);
      while (running) statuses.push((await c.call('ModelInfer', framed(identityInfer(4))).answer).grpcStatus);
    }),
  );
  return statuses;
}

const metric = async (p: { metrics(): Promise<Map<string, number>> }, key: string): Promise<number> => (await p.metrics()).get(key) ?? 0;

beforeAll(async () => {
  models = await modelFolder('router-grpc-hostile-', { identity: identityModel('float32') });
});

afterEach(async () => {
  for (const c of connections.splice(0)) c.close();
  await Promise.all(started.splice(0).map((p) => p.stop(5000)));
});

afterAll(async () => {
  await rm(models, { recursive: true, force: true });
});

describe('the router’s gRPC port against hostile clients', () => {
  it('refuses two million empty inputs itself: no replica is sent it, and every other client’s call succeeds', async () => {
    const { rt, rs } = await pool();
    const address = rt.grpcAddress as string;
    expect((await (await connect(address)).call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    const callsBefore = await replicaCalls(rs);
    const attacker = await connect(address, { localAddress: ATTACKER });
    const bomb = inputsBomb('identity');
    const bombs = Promise.all(Array.from({ length: 3 }, () => attacker.call('ModelInfer', framed(bomb)).answer));
    const good = goodTraffic(address, 4, bombs);
    for (const a of await bombs) {
      expect(a).toMatchObject({ grpcStatus: INVALID_ARGUMENT, code: 'invalid_request' });
      expect(a.grpcMessage).toMatch(/more than 64 inputs/);
    }
    const statuses = await good;
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s !== OK)).toEqual([]);
    // The replicas got the good calls only: none of the three bombs, and none retried.
    expect((await replicaCalls(rs)) - callsBefore).toBe(statuses.length);
  });

  it('answers a malformed message as a replica does: the same status, code and words', async () => {
    const { rt, rs } = await pool();
    const noValue = framed(Buffer.concat([identityInfer(1), Buffer.from([0x22, 0x03, 0x0a, 0x01, 0x70])]));
    const viaRouter = await (await connect(rt.grpcAddress as string)).call('ModelInfer', noValue).answer;
    const direct = await (await connect((rs[0] as ReplicaProcess).grpcAddress as string)).call('ModelInfer', noValue).answer;
    expect(viaRouter).toMatchObject({ grpcStatus: INVALID_ARGUMENT, code: 'invalid_request' });
    expect([viaRouter.grpcStatus, viaRouter.code, viaRouter.grpcMessage]).toEqual([direct.grpcStatus, direct.code, direct.grpcMessage]);
  });

  it('counts half-sent messages in the byte budget HTTP bodies share, and ends them at the idle timeout', async () => {
    const { rt } = await pool(['--max-buffered-bytes', '4Mi', '--body-idle-timeout-ms', '1500']);
    const attacker = await connect(rt.grpcAddress as string, { localAddress: ATTACKER });
    const partial = Array.from({ length: 3 }, () => attacker.call('ModelInfer', framed(Buffer.alloc(2 * MiB)).subarray(0, MiB), { end: false }));
    await eventually(async () => expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBeGreaterThanOrEqual(3 * MiB), 10_000, 25);
    // An HTTP body that does not fit beside them is refused, as before a body of HTTP's own.
    const http = await fetch(`${rt.url}/w/v2/models/identity/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(1.5 * MiB) });
    expect(http.status).toBe(503);
    expect(await http.json()).toMatchObject({ error: 'buffer_full' });
    for (const p of partial) expect(await p.answer).toMatchObject({ grpcStatus: DEADLINE_EXCEEDED, code: 'request_timeout' });
    expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBe(0);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="body_idle"}')).toBe(3);
    const body = { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] }] };
    expect((await fetch(`${rt.url}/w/v2/models/identity/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).status).toBe(200);
  });

  it('holds an answer a client never takes in the byte budget, and resets it after --write-timeout-ms', async () => {
    const { rt } = await pool(['--write-timeout-ms', '1000']);
    const c = await connect(rt.grpcAddress as string, { settings: { initialWindowSize: 1 } });
    const call = c.call('ModelInfer', framed(identityInfer(87_382)), { read: false });
    // The 1 MiB answer came from the replica and waits for the client. It comes after the
    // replica's first load of the model, which a loaded machine can stretch past seconds.
    await eventually(async () => expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBeGreaterThanOrEqual(MiB), 15_000, 50);
    const a = await call.answer;
    expect(a.rstCode).toBe(constants.NGHTTP2_CANCEL);
    expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBe(0);
    expect(await metric(rt, 'modelmux_router_timeouts_total{phase="downstream_write"}')).toBe(1);
  });

  it('cuts off a client that resets its calls (GOAWAY ENHANCE_YOUR_CALM, new connections refused) and forwards none of them', async () => {
    const { rt, rs } = await pool(['--grpc-max-resets-per-client', '50']);
    const address = rt.grpcAddress as string;
    const callsBefore = await replicaCalls(rs);
    const attacker = await connect(address, { localAddress: ATTACKER });
    const stopped = attacker.closed;
    const good = goodTraffic(address, 2, stopped);
    let sent = 0;
    while (!attacker.session.closed && !attacker.session.destroyed && sent < 1000) {
      const { stream } = attacker.call('ModelInfer', framed(identityInfer(1)));
      stream.close(constants.NGHTTP2_CANCEL);
      sent++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    await stopped;
    expect(attacker.goawayCode).toBe(constants.NGHTTP2_ENHANCE_YOUR_CALM);
    expect(sent).toBeGreaterThan(50);
    expect(sent).toBeLessThan(1000);
    // Its next connection is closed before any call.
    const again = await RawGrpcConnection.open(address, { localAddress: ATTACKER }).then(
      (c) => (connections.push(c), c.closed.then(() => 'closed')),
      () => 'refused',
    );
    expect(['closed', 'refused']).toContain(again);
    expect(await metric(rt, 'modelmux_router_rejected_connections_total{reason="resets"}')).toBeGreaterThanOrEqual(1);
    const statuses = await good;
    expect(statuses.filter((s) => s !== OK)).toEqual([]);
    // Every call the replicas saw was a well-behaved client's.
    expect((await replicaCalls(rs)) - callsBefore).toBe(statuses.length);
  });
});
