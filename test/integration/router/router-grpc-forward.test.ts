import { rm } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { eventually } from '../../../harness/eventually.js';
import { framed, RawGrpcConnection } from '../../../harness/raw-grpc-client.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { Faults, GrpcFaultRelay } from '../../helpers/grpc-fault-relay.js';
import { identityInfer } from '../../helpers/grpc-messages.js';
import { Http1FaultRelay } from '../../helpers/http1-fault-relay.js';
import { modelFolder } from '../../helpers/wine-folder.js';

// Issue 51: the router forwards a gRPC call to its replica on either upstream: as the internal
// HTTP/1.1 form on its pooled connections to the replica's HTTP port (--grpc-upstream http1, the
// default, ADR 0054) or as one stream of a pooled HTTP/2 connection to its gRPC port (http2,
// ADR 0049), relaying the answer as it comes. Each replica is reached through a relay that
// breaks its connection on cue (test/helpers/http1-fault-relay.ts, grpc-fault-relay.ts), so the
// forwarder's rules are driven at the HTTP/1.1 and the frame level alike: retries only before
// the answer's first byte, an answer stalled half-way, the call's deadline sent on; and what is
// one upstream's own: a connection the replica sends away (HTTP/2), a replica at its limit and
// an older replica without the form (HTTP/1.1).

jest.setTimeout(120_000);

const OK = 0;
const UNAVAILABLE = 14;
const DEADLINE_EXCEEDED = 4;
const RESOURCE_EXHAUSTED = 8;

let models: string;
const started: { stop(graceMs?: number): Promise<number | null> }[] = [];

/** A relay in front of one replica: the calls it got (their headers), whichever upstream. */
interface Relay {
  readonly calls: readonly { headers: NodeJS.Dict<string | string[]>; at: number }[];
  close(): Promise<void>;
}

const relays: Relay[] = [];
const connections: RawGrpcConnection[] = [];

/** `n` replicas, each behind a relay sharing `faults`, and a router whose one route is them. */
type Pool<R extends Relay> = (n: number, faults: Faults, routerArgs?: string[], replicaArgs?: string[]) => Promise<{ rt: RouterProcess; rs: ReplicaProcess[]; relays: R[] }>;

function poolOn<R extends Relay>(upstream: 'http1' | 'http2', relayed: (r: ReplicaProcess, faults: Faults) => Promise<{ relay: R; url: string }>): Pool<R> {
  return async (n, faults, routerArgs = [], replicaArgs = []) => {
    const rs = await Promise.all(Array.from({ length: n }, () => startReplica({ args: ['--model-source', `file://${models}`, ...replicaArgs] })));
    started.push(...rs);
    const own = await Promise.all(rs.map((r) => relayed(r, faults)));
    relays.push(...own.map((o) => o.relay));
    const rt = await startRouter(['--routes', `/w=${own.map((o) => o.url).join(',')}`, '--poll-interval-ms', '200', '--grpc-upstream', upstream, ...routerArgs]);
    started.push(rt);
    return { rt, rs, relays: own.map((o) => o.relay) };
  };
}

/** The relay in front of each replica's gRPC port, its HTTP port the one discovery reads. */
const onHttp2 = poolOn('http2', async (r, faults) => {
  const relay = await GrpcFaultRelay.start(r.grpcAddress as string, faults);
  return { relay, url: `${r.url}?grpc-port=${relay.port}` };
});

/** The relay in front of each replica's HTTP port (discovery's requests pass through it), its gRPC port its own. */
const onHttp1 = poolOn('http1', async (r, faults) => {
  const relay = await Http1FaultRelay.start(`127.0.0.1:${r.port}`, faults);
  return { relay, url: relay.url(Number((r.grpcAddress as string).split(':')[1])) };
});

async function connect(address: string): Promise<RawGrpcConnection> {
  const c = await RawGrpcConnection.open(address);
  connections.push(c);
  return c;
}

const callsSeen = (rs: readonly Relay[]): number => rs.reduce((n, r) => n + r.calls.length, 0);

const metric = async (p: { metrics(): Promise<Map<string, number>> }, key: string): Promise<number> => (await p.metrics()).get(key) ?? 0;

const retries = async (rt: RouterProcess): Promise<number> => {
  let n = 0;
  for (const [key, value] of await rt.metrics()) if (key.startsWith('modelmux_router_retries_total{')) n += value;
  return n;
};

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

describe.each([
  ['HTTP/1.1', onHttp1],
  ['HTTP/2', onHttp2],
] as [string, Pool<Relay>][])('the router’s gRPC forwarder on the %s upstream, against replica connections that fail', (_upstream, pool) => {
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
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(2400);
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
});

describe('the router’s gRPC forwarder on the HTTP/2 upstream', () => {
  const pool = onHttp2;

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

describe('the router’s gRPC forwarder on the HTTP/1.1 upstream', () => {
  const pool = onHttp1;

  it('retries a call a replica refuses overloaded on another replica', async () => {
    const faults = new Faults();
    const { rt, rs, relays: rl } = await pool(2, faults, [], ['--test-hooks', '--max-ongoing-requests', '1']);
    const c = await connect(rt.grpcAddress as string);
    expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    // The first replica's one slot is taken behind the router's back, so the router sends it calls it refuses.
    const busy = await connect(rs[0]?.grpcAddress as string);
    const held = busy.call('ModelInfer', framed(identityInfer(1)), { metadata: { 'x-modelmux-test-delay-ms': '5000' } }).answer;
    await eventually(async () => expect(await metric(rs[0] as ReplicaProcess, 'modelmux_replica_ongoing_requests')).toBe(1), 3000, 20);
    const relay = rl[0] as Http1FaultRelay;
    const before = relay.calls.length;
    // Each call goes to the busy replica with a chance of one in two at least: twenty calls miss it with a chance of one in a million.
    for (let i = 0; i < 20 && relay.calls.length === before; i++) expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    const refused = relay.calls.length - before;
    expect(refused).toBeGreaterThanOrEqual(1);
    expect(await metric(rt, 'modelmux_router_retries_total{route="/w",reason="overloaded"}')).toBe(refused);
    expect((await held).grpcStatus).toBe(OK);
  });

  it('sends the calls for a replica that answers the form 404 (an older version) over HTTP/2 from then on, the first at once, with no retry or ejection', async () => {
    const faults = new Faults();
    const { rt, rs, relays: rl } = await pool(1, faults, ['--max-retries', '0']);
    const relay = rl[0] as Http1FaultRelay;
    relay.older = true;
    const c = await connect(rt.grpcAddress as string);
    for (let i = 0; i < 4; i++) expect((await c.call('ModelInfer', framed(identityInfer(1))).answer).grpcStatus).toBe(OK);
    expect(relay.calls).toHaveLength(1);
    expect(await metric(rs[0] as ReplicaProcess, 'modelmux_replica_grpc_requests_total{method="ModelInfer",code="OK"}')).toBe(4);
    expect(await retries(rt)).toBe(0);
    for (const [key, value] of await rt.metrics()) if (key.startsWith('modelmux_router_outlier_ejections_total{')) expect([key, value]).toEqual([key, 0]);
  });
});
