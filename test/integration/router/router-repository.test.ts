import { jest } from '@jest/globals';
import { rm } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { RawClient } from '../../helpers/raw-http-client.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';
import { get, post, v2Body, wineRows } from '../replica/wine-fixtures.js';

jest.setTimeout(90_000);

/**
 * The model repository extension through the router: load placed, index gathered, unload fanned
 * out, on the router's admin port; refused on its public port, unless a bearer token was set.
 */

/** What `MODELMUX_REPOSITORY_API_TOKEN` holds for the second router. */
const TOKEN = 'k3y-0f-the-repository-api_x';

let dir: string;
let rs: ReplicaProcess[];
let rt: RouterProcess;
/** The same pool behind a router that serves the API on its public port to holders of TOKEN. */
let withToken: RouterProcess;

beforeAll(async () => {
  dir = await wineModelFolder('modelmux-router-repository-', ['alpha', 'beta', 'gamma']);
  rs = await Promise.all([0, 1, 2].map(() => startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '4'] })));
  const routes = ['--routes', `/wine=${rs.map((r) => r.url).join(',')}`, '--poll-interval-ms', '200'];
  [rt, withToken] = await Promise.all([startRouter(routes), startRouter(routes, { MODELMUX_REPOSITORY_API_TOKEN: TOKEN })]);
});

afterAll(async () => {
  await Promise.all([rt?.stop(5000), withToken?.stop(5000)]);
  await Promise.all((rs ?? []).map((r) => r.stop(5000)));
  await rm(dir, { recursive: true, force: true });
});

const loaded = async (r: ReplicaProcess): Promise<string[]> => (await get(`${r.url}/models`)).body.loaded as string[];
const index = async (body: unknown = {}): Promise<unknown> => (await post(`${rt.adminUrl}/wine/v2/repository/index`, body)).body;
/** Every replica's loaded models, from the replicas themselves. */
const tables = (): Promise<string[][]> => Promise.all(rs.map(async (r) => (await loaded(r)).sort()));

describe("model repository extension on the router's admin port", () => {
  it('loads a model, lists it once, and unloads it from every replica that holds it', async () => {
    const load = await post(`${rt.adminUrl}/wine/v2/repository/models/alpha/load`, {});
    expect(load.status).toBe(200);
    const first = load.headers.get('x-modelmux-replica');
    expect(first).not.toBeNull();
    // A second holder, loaded on a replica directly (as a hot model would spread).
    const other = rs.find((r) => `127.0.0.1:${r.port}` !== first) as ReplicaProcess;
    expect((await post(`${other.url}/v2/repository/models/alpha/load`, {})).status).toBe(200);
    expect((await post(`${rt.adminUrl}/wine/v2/repository/models/beta/load`, {})).status).toBe(200);
    const holders = async (): Promise<number> => (await Promise.all(rs.map(loaded))).filter((l) => l.includes('alpha')).length;
    expect(await holders()).toBe(2);

    expect(await index()).toEqual([
      { name: 'alpha', state: 'READY' },
      { name: 'beta', state: 'READY' },
    ]);
    expect(await index({ ready: true })).toEqual(await index());

    const unload = await post(`${rt.adminUrl}/wine/v2/repository/models/alpha/unload`, {});
    expect(unload.status).toBe(200);
    expect(unload.headers.get('x-request-id')).toMatch(/.+/);
    expect(unload.body.replicas).toEqual(rs.map((r) => r.url).sort()); // The names /routes lists.
    await eventually(async () => expect(await holders()).toBe(0), 10_000, 25);
    expect(await index()).toEqual([{ name: 'beta', state: 'READY' }]);
  });

  it('answers an unload of a model nobody holds with success, as a replica does', async () => {
    const a = await post(`${rt.adminUrl}/wine/v2/repository/models/nobody/unload`, {});
    expect(a.status).toBe(200);
    expect(a.body.replicas).toHaveLength(3);
  });

  it('refuses a malformed index request and a malformed model id at the router', async () => {
    const bad = await post(`${rt.adminUrl}/wine/v2/repository/index`, { ready: 'yes' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_request');
    const id = await post(`${rt.adminUrl}/wine/v2/repository/models/..%2Fx/unload`, {});
    expect(id.status).toBe(400);
    expect(id.body.error).toBe('invalid_model_id');
  });

  it("counts an index request's body in the router's byte budget while it arrives, and lets go of it when the client leaves", async () => {
    const c = new RawClient(rt.adminPort).send('POST /wine/v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    const part = Buffer.alloc(1 << 20, ' ');
    c.send(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]));
    await eventually(async () => expect((await rt.metrics()).get('modelmux_router_buffered_bytes') ?? 0).toBeGreaterThanOrEqual(part.length), 10_000, 25);
    c.socket.destroy();
    await eventually(async () => expect((await rt.metrics()).get('modelmux_router_buffered_bytes')).toBe(0), 10_000, 25);
  });

  it('serves its own endpoints and nothing of the data plane', async () => {
    for (const path of ['/healthz', '/readyz']) expect((await fetch(`${rt.adminUrl}${path}`)).status).toBe(200);
    expect((await get(`${rt.adminUrl}/routes`)).body.routes).toEqual([expect.objectContaining({ prefix: '/wine' })]);
    expect(await (await fetch(`${rt.adminUrl}/metrics`)).text()).toContain('modelmux_router_buffered_bytes');
    const infer = await post(`${rt.adminUrl}/wine/v2/models/beta/infer`, v2Body(wineRows(1)));
    expect([infer.status, infer.body.error]).toEqual([404, 'not_found']);
  });
});

describe("model repository extension on the router's public port", () => {
  it('refuses unload, load and index, on the fast path and on node:http, and no replica loads or drops a model', async () => {
    expect((await post(`${rt.adminUrl}/wine/v2/repository/models/beta/load`, {})).status).toBe(200);
    const before = await tables();
    expect(before.flat()).toContain('beta');
    for (const path of ['models/beta/unload', 'models/gamma/load', 'index']) {
      const a = await post(`${rt.url}/wine/v2/repository/${path}`, {});
      expect([a.status, a.body.error]).toEqual([403, 'repository_api_disabled']);
      expect(a.body.message).toContain('admin port');
      expect(a.headers.get('x-request-id')).toMatch(/.+/);
    }
    // A chunked body: node:http reads this one, not the fast path.
    const c = new RawClient(rt.port).send(
      'POST /wine/v2/repository/models/beta/unload HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
    );
    await c.until((r) => r.responses() === 1 && r.text.includes('}'));
    c.socket.destroy();
    expect(c.text).toMatch(/^HTTP\/1\.1 403 /);
    expect(c.json()).toMatchObject({ error: 'repository_api_disabled' });
    // Served, each answer would have come once every replica had dropped beta, or one had loaded gamma.
    expect(await tables()).toEqual(before);
  });

  it('serves neither /metrics nor /routes, which are paths like any other there', async () => {
    for (const path of ['/metrics', '/routes']) {
      const a = await get(`${rt.url}${path}`);
      expect([a.status, a.body.error]).toEqual([404, 'route_not_found']);
    }
  });

  it('with --repository-api-token, refuses a call without the bearer token or with another, and serves the one that has it', async () => {
    const unload = (headers: Record<string, string>) => post(`${withToken.url}/wine/v2/repository/models/beta/unload`, {}, headers);
    const holders = async (): Promise<number> => (await tables()).filter((t) => t.includes('beta')).length;
    expect(await holders()).toBeGreaterThan(0);
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}x` }, { authorization: `Basic ${TOKEN}` }, { authorization: TOKEN }]) {
      const a = await unload(headers);
      expect([a.status, a.body.error]).toEqual([401, 'repository_api_unauthorized']);
      expect(a.headers.get('www-authenticate')).toMatch(/^Bearer /);
    }
    expect(await holders()).toBeGreaterThan(0);
    const a = await unload({ authorization: `Bearer ${TOKEN}` });
    expect(a.status).toBe(200);
    expect(a.body.replicas).toHaveLength(3);
    expect(await holders()).toBe(0);
    const load = await post(`${withToken.url}/wine/v2/repository/models/gamma/load`, {}, { authorization: `bearer ${TOKEN}` });
    expect(load.status).toBe(200);
    expect((await tables()).flat()).toContain('gamma');
    expect(withToken.logs()).not.toContain(TOKEN);
  });
});

describe('a replica of the route gone', () => {
  it('is never counted in an unload: it is named, or already dropped from the route', async () => {
    const gone = rs[2] as ReplicaProcess;
    await gone.stop(5000);
    // Which answer depends on whether the 200 ms poll has seen the replica go: both are right.
    const a = await post(`${rt.adminUrl}/wine/v2/repository/models/alpha/unload`, {});
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
