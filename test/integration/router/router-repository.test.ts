import { jest } from '@jest/globals';
import { rm } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { RawClient } from '../../helpers/raw-http-client.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';
import { eventually, get, post } from '../replica/wine-fixtures.js';

jest.setTimeout(90_000);

/** The model repository extension through the router: load placed, index gathered, unload fanned out. */

let dir: string;
let rs: ReplicaProcess[];
let rt: RouterProcess;

beforeAll(async () => {
  dir = await wineModelFolder('modelmux-router-repository-', ['alpha', 'beta']);
  rs = await Promise.all([0, 1, 2].map(() => startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '4'] })));
  rt = await startRouter(['--routes', `/wine=${rs.map((r) => r.url).join(',')}`, '--poll-interval-ms', '200']);
});

afterAll(async () => {
  await rt?.stop(5000);
  await Promise.all((rs ?? []).map((r) => r.stop(5000)));
  await rm(dir, { recursive: true, force: true });
});

const loaded = async (r: ReplicaProcess): Promise<string[]> => (await get(`${r.url}/models`)).body.loaded as string[];
const index = async (body: unknown = {}): Promise<unknown> => (await post(`${rt.url}/wine/v2/repository/index`, body)).body;

describe('model repository extension through the router', () => {
  it('loads a model, lists it once, and unloads it from every replica that holds it', async () => {
    const load = await post(`${rt.url}/wine/v2/repository/models/alpha/load`, {});
    expect(load.status).toBe(200);
    const first = load.headers.get('x-modelmux-replica');
    expect(first).not.toBeNull();
    // A second holder, loaded on a replica directly (as a hot model would spread).
    const other = rs.find((r) => `127.0.0.1:${r.port}` !== first) as ReplicaProcess;
    expect((await post(`${other.url}/v2/repository/models/alpha/load`, {})).status).toBe(200);
    expect((await post(`${rt.url}/wine/v2/repository/models/beta/load`, {})).status).toBe(200);
    const holders = async (): Promise<number> => (await Promise.all(rs.map(loaded))).filter((l) => l.includes('alpha')).length;
    expect(await holders()).toBe(2);

    expect(await index()).toEqual([
      { name: 'alpha', state: 'READY' },
      { name: 'beta', state: 'READY' },
    ]);
    expect(await index({ ready: true })).toEqual(await index());

    const unload = await post(`${rt.url}/wine/v2/repository/models/alpha/unload`, {});
    expect(unload.status).toBe(200);
    expect(unload.headers.get('x-request-id')).toMatch(/.+/);
    expect(unload.body.replicas).toEqual(rs.map((r) => r.url).sort()); // The names /routes lists.
    await eventually(async () => (await holders()) === 0);
    expect(await index()).toEqual([{ name: 'beta', state: 'READY' }]);
  });

  it('answers an unload of a model nobody holds with success, as a replica does', async () => {
    const a = await post(`${rt.url}/wine/v2/repository/models/nobody/unload`, {});
    expect(a.status).toBe(200);
    expect(a.body.replicas).toHaveLength(3);
  });

  it('refuses a malformed index request and a malformed model id at the router', async () => {
    const bad = await post(`${rt.url}/wine/v2/repository/index`, { ready: 'yes' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_request');
    const id = await post(`${rt.url}/wine/v2/repository/models/..%2Fx/unload`, {});
    expect(id.status).toBe(400);
    expect(id.body.error).toBe('invalid_model_id');
  });

  it("counts an index request's body in the router's byte budget while it arrives, and lets go of it when the client leaves", async () => {
    const c = new RawClient(rt.port).send('POST /wine/v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    const part = Buffer.alloc(1 << 20, ' ');
    c.send(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]));
    await eventually(async () => ((await rt.metrics()).get('modelmux_router_buffered_bytes') ?? 0) >= part.length);
    c.socket.destroy();
    await eventually(async () => (await rt.metrics()).get('modelmux_router_buffered_bytes') === 0);
  });

  it('never counts a replica that is gone: it names it, or has already dropped it from the route', async () => {
    const gone = rs[2] as ReplicaProcess;
    await gone.stop(5000);
    // Which answer depends on whether the 200 ms poll has seen the replica go: both are right.
    const a = await post(`${rt.url}/wine/v2/repository/models/alpha/unload`, {});
    if (a.status === 502) {
      expect(a.body.error).toBe('upstream_unavailable');
      expect(a.body.message).toContain(`127.0.0.1:${gone.port}`);
    } else {
      expect(a.status).toBe(200);
      expect(a.body.replicas).toHaveLength(2);
      expect(a.body.replicas).not.toContain(gone.url);
    }
  });
});
