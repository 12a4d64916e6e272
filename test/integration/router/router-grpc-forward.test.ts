import { rm } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { eventually } from '../../../harness/eventually.js';
import { framed, RawGrpcConnection } from '../../../harness/raw-grpc-client.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { Faults, GrpcFaultRelay } from '../../helpers/grpc-fault-relay.js';
import { identityInfer } from '../../helpers/grpc-messages.js';
import { modelFolder } from '../../helpers/wine-folder.js';

// Issue 51: the router forwards a gRPC call as one stream of a pooled HTTP/2 connection to its
// replica, relaying the answer's frames as they come. Each replica's gRPC port is reached
// through a relay that breaks its connection on cue (test/helpers/grpc-fault-relay.ts), so the
// forwarder's rules are driven at the frame level: retries only before the answer's first byte,
// an answer stalled half-way, the call's deadline sent on, a connection the replica sends away.
// The router runs on the HTTP/2 upstream (--grpc-upstream http2); the HTTP/1.1 one, its default,
// is driven so in router-grpc-http1-upstream.test.ts.

jest.setTimeout(120_000);

const OK = 0;
const UNAVAILABLE = 14;
const DEADLINE_EXCEEDED = 4;
const RESOURCE_EXHAUSTED = 8;

let models: string;
const started: { stop(graceMs?: number): Promise<number | null> }[] = [];
const relays: GrpcFaultRelay[] = [];
const connections: RawGrpcConnection[] = [];

/** `n` replicas, each behind a relay sharing `faults`, and a router whose one route is them. */
async function pool(n: number, faults: Faults, routerArgs: string[] = []): Promise<{ rt: RouterProcess; rs: ReplicaProcess[]; relays: GrpcFaultRelay[] }> {
  const rs = await Promise.all(Array.from({ length: n }, () => startReplica({ args: ['--model-source', `file://${models}`] })));
  started.push(...rs);
  const own = await Promise.all(rs.map((r) => GrpcFaultRelay.start(r.grpcAddress as string, faults)));
  relays.push(...own);
  const urls = rs.map((r, i) => `${r.url}?grpc-port=${(own[i] as GrpcFaultRelay).port}`);
  const rt = await startRouter(['--routes', `/w=${urls.join(',')}`, '--poll-interval-ms', '200', '--grpc-upstream', 'http2', ...routerArgs]);
  started.push(rt);
  return { rt, rs, relays: own };
}

async function connect(address: string): Promise<RawGrpcConnection> {
  const c = await RawGrpcConnection.open(address);
  connections.push(c);
  return c;
}

const callsSeen = (rs: readonly GrpcFaultRelay[]): number => rs.reduce((n, r) => n + r.calls.length, 0);

const metric = async (p: { metrics(): Promise<Map<string, number>> }, key: string): Promise<number> => (await p.metrics()).get(key) ?? 0;

beforeAll(async () => {
  models = await modelFolder('router-grpc-forward-', { identity: identityModel('float32') });
});

afterEach(async () => {
  for (const c of connections.splice(0)) c.close();
  await Promise.all(relays.splice(0).map((r) => r.close()));
  await Promise.all(started.splice(0).map((p) => p.stop(5000)));
});

afterAll(async () => {
  await rm(models, { recursive: true, force: true });
});

describe('the router’s gRPC forwarder, against replica connections that fail', () => {
  it('retries a call reset before its answer on another replica, with what is left of the call’s deadline', async () => {
    const faults = new Faults();
    const { rt, relays: rl } = await pool(2, faults);
    const c = await connect(rt.grpcAddress as string);
    expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    const before = rl.map((r) => r.calls.length);
    faults.delayMs = 600;
    faults.next('reset');
    const a = await c.call('ModelInfer', framed(identityInfer(2)), { metadata: { 'grpc-timeout': '5S' } }).answer;
    expect(a.grpcStatus).toBe(OK);
    expect(a.body.length).toBeGreaterThan(5 + 24);
    const tries = rl.flatMap((r, i) => r.calls.slice(before[i]));
    expect(tries).toHaveLength(2);
    // Each try carries the call's deadline less the time already spent, in grpc-timeout.
    const [first, second] = tries.sort((x, y) => x.at - y.at).map((t) => Number(/^(\d+)m$/.exec(String(t.headers['grpc-timeout']))?.[1]));
    expect(first).toBeLessThanOrEqual(5000);
    expect(first).toBeGreaterThan(4000);
    expect(second).toBeLessThanOrEqual((first as number) - 500);
    expect(await metric(rt, 'modelmux_router_retries_total{route="/w",reason="connect_error"}')).toBe(1);
  });

  it('never retries a call once a byte of its answer has gone to the client: the client gets the break', async () => {
    const faults = new Faults();
    const { rt, relays: rl } = await pool(2, faults);
    const c = await connect(rt.grpcAddress as string);
    expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    const before = callsSeen(rl);
    faults.next('break', 'break');
    const a = await c.call('ModelInfer', framed(identityInfer(4))).answer;
    // The answer's first bytes reached the client before the replica broke off: no other replica is asked.
    expect(a.body.length).toBeGreaterThanOrEqual(5);
    expect(a.grpcStatus).toBe(UNAVAILABLE);
    expect(a.code).toBe('upstream_unavailable');
    expect(callsSeen(rl) - before).toBe(1);
    expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBe(0);
  });

  it('relays the first bytes of an answer that stalls half-way, and ends it at the call’s deadline, not at the client’s write timeout', async () => {
    const faults = new Faults();
    // The client takes every byte it gets: the stall is the replica's, which the write timeout does not judge.
    const { rt, relays: rl } = await pool(1, faults, ['--write-timeout-ms', '1000']);
    const c = await connect(rt.grpcAddress as string);
    faults.next('stall');
    const call = c.call('ModelInfer', framed(identityInfer(4)), { metadata: { 'grpc-timeout': '2500m' } });
    let firstBytesAt = 0;
    call.stream.once('data', () => (firstBytesAt = Date.now()));
    const sentAt = Date.now();
    const a = await call.answer;
    // The headers and first bytes came while the replica's answer was stalled, not at its end.
    expect(firstBytesAt - sentAt).toBeLessThan(2000);
    expect(a.body.length).toBeGreaterThanOrEqual(5);
    expect(a.grpcStatus).toBe(DEADLINE_EXCEEDED);
    expect(a.code).toBe('timeout');
    expect(rl[0]?.calls).toHaveLength(1);
    await eventually(async () => expect(await metric(rt, 'modelmux_router_buffered_bytes')).toBe(0), 5000, 50);
  });

  it('refuses an answer larger than --grpc-max-response-bytes from its prefix, before any byte of it goes out', async () => {
    const faults = new Faults();
    const { rt, relays: rl } = await pool(2, faults, ['--grpc-max-response-bytes', '1Ki']);
    const c = await connect(rt.grpcAddress as string);
    expect((await c.call('ModelInfer', framed(identityInfer(4))).answer).grpcStatus).toBe(OK);
    const before = callsSeen(rl);
    const a = await c.call('ModelInfer', framed(identityInfer(200))).answer;
    expect(a.body.length).toBe(0);
    expect(a.grpcStatus).toBe(RESOURCE_EXHAUSTED);
    expect(a.grpcMessage).toMatch(/larger than --grpc-max-response-bytes/);
    expect(callsSeen(rl) - before).toBe(1);
  });

  it('opens a new connection to a replica that sent its connection away, and loses no call', async () => {
    const faults = new Faults();
    const { rt, relays: rl } = await pool(1, faults, ['--max-retries', '0']);
    const c = await connect(rt.grpcAddress as string);
    faults.next('goaway');
    expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    const relay = rl[0] as GrpcFaultRelay;
    await eventually(() => expect(relay.connections).toBe(1), 2000, 20);
    for (let i = 0; i < 5; i++) expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    expect(relay.connections).toBe(2);
    expect(relay.calls).toHaveLength(6);
  });
});
