import { request } from 'node:http';
import { rm } from 'node:fs/promises';
import { jest } from '@jest/globals';
import { status } from '@grpc/grpc-js';
import { messagePrefix } from '../../../common/grpc/grpc-frame.js';
import { GRPC_SERVICE_PATH } from '../../../common/grpc/grpc-http1-form.js';
import { eventually } from '../../../harness/eventually.js';
import { framed } from '../../../harness/raw-grpc-client.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { identityModel } from '../../helpers/datatype-models.js';
import { identityInfer } from '../../helpers/grpc-messages.js';
import { RawClient } from '../../helpers/raw-http-client.js';
import { modelFolder } from '../../helpers/wine-folder.js';

// Issue 51: the router's internal HTTP/1.1 form of a gRPC call (ADR 0054), served on the
// replica's HTTP port by the gRPC port's handlers, under the gRPC port's bounds. Driven with
// node:http and raw sockets against a real replica process.

jest.setTimeout(120_000);

const { OK, INVALID_ARGUMENT, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNIMPLEMENTED, UNAVAILABLE } = status;
const PATH = GRPC_SERVICE_PATH;

let models: string;
const started: ReplicaProcess[] = [];

async function replica(args: string[] = []): Promise<ReplicaProcess> {
  const r = await startReplica({ args: ['--model-source', `file://${models}`, ...args] });
  started.push(r);
  return r;
}

interface FormAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  grpcStatus: number;
  code: string | undefined;
}

/** One call of the form on its own connection, as the router sends it. */
function formCall(r: ReplicaProcess, method: string, body: Buffer, headers: Record<string, string> = {}): Promise<FormAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(`${r.url}${PATH}${method}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/grpc', 'content-length': String(body.length), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          grpcStatus: Number(res.headers['grpc-status']),
          code: res.headers['x-modelmux-error-code'] as string | undefined,
        }),
      );
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end(body);
  });
}

const metric = async (r: ReplicaProcess, key: string): Promise<number> => (await r.metrics()).get(key) ?? 0;

beforeAll(async () => {
  models = await modelFolder('grpc-http1-form-', { identity: identityModel('float32') });
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop(5000)));
});

afterAll(async () => {
  await rm(models, { recursive: true, force: true });
});

describe('the replica’s HTTP port serving the router’s HTTP/1.1 form of gRPC calls', () => {
  it('answers a call whole: HTTP 200, its status and trailers in the head, its message as the body, counted once under its method', async () => {
    const r = await replica();
    const a = await formCall(r, 'ModelInfer', framed(identityInfer(2)), { 'x-request-id': 'form-1' });
    expect(a.status).toBe(200);
    expect(a.grpcStatus).toBe(OK);
    expect(a.headers['x-modelmux-grpc-trailers']).toMatch(/grpc-status/);
    expect(a.headers['x-request-id']).toBe('form-1');
    expect(a.body.readUInt32BE(1)).toBe(a.body.length - 5);
    expect(a.body.includes(Buffer.from('identity'))).toBe(true);
    expect(await metric(r, 'modelmux_replica_grpc_requests_total{method="ModelInfer",code="OK"}')).toBe(1);
  });

  it('answers a request of the service’s path that is not gRPC with the HTTP API’s JSON 404', async () => {
    const r = await replica();
    const a = await formCall(r, 'ModelInfer', framed(identityInfer(1)), { 'content-type': 'application/json' });
    expect(a.status).toBe(404);
    expect(a.headers['grpc-status']).toBeUndefined();
    expect(JSON.parse(a.body.toString())).toMatchObject({ error: 'not_found' });
  });

  it('refuses malformed calls with a gRPC status before any handler, each counted once, and stays up', async () => {
    const r = await replica(['--max-body-bytes', '4Ki']);
    const msg = identityInfer(1);
    const truncated = Buffer.concat([messagePrefix(msg.length + 10), msg]);
    const compressed = framed(msg);
    compressed[0] = 1;
    const cases: [string, Buffer, Record<string, string>, number][] = [
      ['ModelInfer', truncated, {}, INVALID_ARGUMENT],
      ['ModelInfer', compressed, {}, UNIMPLEMENTED],
      ['ModelInfer', framed(Buffer.alloc(8 * 1024)), {}, RESOURCE_EXHAUSTED],
      // The prefix alone says too much: the body is refused before it is read.
      ['ModelInfer', messagePrefix(1024 * 1024), {}, RESOURCE_EXHAUSTED],
      ['NoSuchMethod', framed(msg), {}, UNIMPLEMENTED],
      ['ModelInfer', framed(msg), { 'grpc-timeout': 'soon' }, INVALID_ARGUMENT],
    ];
    for (const [method, body, headers, expected] of cases) {
      const a = await formCall(r, method, body, headers);
      expect([method, a.status, a.grpcStatus, a.body.length]).toEqual([method, 200, expected, 0]);
    }
    expect(await metric(r, 'modelmux_replica_grpc_requests_total{method="ModelInfer",code="INVALID_ARGUMENT"}')).toBe(2);
    expect(await metric(r, 'modelmux_replica_grpc_requests_total{method="ModelInfer",code="RESOURCE_EXHAUSTED"}')).toBe(2);
    expect(await metric(r, 'modelmux_replica_grpc_requests_total{method="ModelInfer",code="UNIMPLEMENTED"}')).toBe(1);
    expect((await formCall(r, 'ModelInfer', framed(msg))).grpcStatus).toBe(OK);
  });

  it('ends a call whose message stops arriving at the message idle timeout, DEADLINE_EXCEEDED request_timeout', async () => {
    const r = await replica(['--body-idle-timeout-ms', '400']);
    const msg = framed(identityInfer(1));
    const c = new RawClient(r.port);
    c.send(`POST ${PATH}ModelInfer HTTP/1.1\r\nhost: x\r\ncontent-type: application/grpc\r\ncontent-length: ${msg.length}\r\n\r\n`).send(msg.subarray(0, 8));
    const sentAt = Date.now();
    await c.until((x) => x.text.includes('\r\n\r\n'), 5000);
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(350);
    expect(c.text).toMatch(/^HTTP\/1\.1 200/);
    expect(c.text).toMatch(/\r\ngrpc-status: 4\r\n/);
    expect(c.text).toMatch(/\r\nx-modelmux-error-code: request_timeout\r\n/);
    expect(await metric(r, 'modelmux_replica_grpc_bounded_total{reason="message_idle"}')).toBe(1);
    c.socket.destroy();
  });

  it('closes the connection of an answer its router does not take within --write-timeout-ms', async () => {
    const r = await replica(['--max-body-bytes', '64Mi', '--write-timeout-ms', '500']);
    // An answer of 36 MB, more than the loopback's socket buffers hold.
    const msg = framed(identityInfer(3_000_000));
    const c = new RawClient(r.port);
    c.socket.pause();
    c.send(`POST ${PATH}ModelInfer HTTP/1.1\r\nhost: x\r\ncontent-type: application/grpc\r\ncontent-length: ${msg.length}\r\n\r\n`).send(msg);
    await eventually(async () => expect(await metric(r, 'modelmux_replica_grpc_bounded_total{reason="write"}')).toBe(1), 20_000, 100);
    c.socket.resume();
    await c.until((x) => x.closed, 5000);
    expect(await metric(r, 'modelmux_replica_grpc_requests_total{method="ModelInfer",code="OK"}')).toBe(1);
  });

  it('ends a call at its grpc-timeout while its handler still works, DEADLINE_EXCEEDED', async () => {
    const r = await replica(['--test-hooks']);
    const sentAt = Date.now();
    const a = await formCall(r, 'ModelInfer', framed(identityInfer(1)), { 'grpc-timeout': '300m', 'x-modelmux-test-delay-ms': '5000' });
    expect(a.grpcStatus).toBe(DEADLINE_EXCEEDED);
    expect(Date.now() - sentAt).toBeLessThan(3000);
  });

  it('admits calls as the gRPC port does: the ongoing gauge counts a held call, a call past --max-ongoing-requests is refused overloaded', async () => {
    const r = await replica(['--test-hooks', '--max-ongoing-requests', '1']);
    await formCall(r, 'ModelInfer', framed(identityInfer(1)));
    const held = formCall(r, 'ModelInfer', framed(identityInfer(1)), { 'x-modelmux-test-delay-ms': '1500' });
    await eventually(async () => expect(await metric(r, 'modelmux_replica_ongoing_requests')).toBe(1), 3000, 20);
    const refused = await formCall(r, 'ModelInfer', framed(identityInfer(1)));
    expect(refused.grpcStatus).toBe(UNAVAILABLE);
    expect(refused.code).toBe('overloaded');
    expect(refused.headers['x-modelmux-overloaded']).toBeDefined();
    expect((await held).grpcStatus).toBe(OK);
    expect(await metric(r, 'modelmux_replica_ongoing_requests')).toBe(0);
  });

  it('does not serve the form without a gRPC port (--grpc-port -1): the HTTP API answers it 404, as an older replica does', async () => {
    const r = await startReplica({ grpcPort: -1, args: ['--model-source', `file://${models}`] });
    started.push(r);
    const a = await formCall(r, 'ModelInfer', framed(identityInfer(1)));
    expect(a.status).toBe(404);
  });
});
