import { jest } from '@jest/globals';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { wineModelBytes } from '../../../common/wine-model.js';
import { eventually } from '../../../harness/eventually.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';
import { expectClose, expected, post, predictions, v2Body, v2Outputs, wineRows, type Answer } from '../replica/wine-fixtures.js';

jest.setTimeout(240_000);

/**
 * Split ModelRoutes through real router and replica processes running the wine ONNX models:
 * every backend is a model of its own with its own weights, so an answer's numbers say which
 * model computed it, independently of the x-modelmux-backend header the router sets.
 */

const MODELS = ['stable', 'canary', 'shadow', 'u1', 'u2'];
const ROUTES = `
apiVersion: modelmux.io/v1alpha1
kind: ModelRoute
metadata: { name: wine-9-canary }
spec:
  deploymentRef: { name: wine }
  model: wine-9
  split:
    backends: [{ model: wine-9@1, weight: 1 }, { model: wine-9@2, weight: 1 }]
---
apiVersion: modelmux.io/v1alpha1
kind: ModelRoute
metadata: { name: wine-7 }
spec:
  deploymentRef: { name: wine }
  split:
    backends: [{ model: stable, weight: 90 }, { model: canary, weight: 10 }]
---
apiVersion: modelmux.io/v1alpha1
kind: ModelRoute
metadata: { name: sticky }
spec:
  deploymentRef: { name: wine }
  split:
    stickyHeader: x-user-id
    backends: [{ model: u1, weight: 50 }, { model: u2, weight: 50 }]
---
apiVersion: modelmux.io/v1alpha1
kind: ModelRoute
metadata: { name: shadowed }
spec:
  deploymentRef: { name: wine }
  split:
    backends: [{ model: stable }]
    mirror: { model: shadow, percent: 100 }
---
apiVersion: modelmux.io/v1alpha1
kind: ModelRoute
metadata: { name: gone }
spec:
  deploymentRef: { name: wine }
  split: { backends: [{ model: no-such-model }] }
---
apiVersion: modelmux.io/v1alpha1
kind: ModelRoute
metadata: { name: loop-a }
spec:
  deploymentRef: { name: wine }
  split: { backends: [{ model: loop-b }] }
---
apiVersion: modelmux.io/v1alpha1
kind: ModelRoute
metadata: { name: loop-b }
spec:
  deploymentRef: { name: wine }
  split: { backends: [{ model: stable, weight: 1 }, { model: loop-a, weight: 1 }] }
`;

let dir: string;
let routesFile: string;
let replicas: ReplicaProcess[] = [];
const routers: RouterProcess[] = [];

async function router(args: string[] = []): Promise<RouterProcess> {
  const r = await startRouter(['--routes', `/wine=${replicas.map((p) => p.url).join(',')}`, '--poll-interval-ms', '200', '--routes-file', routesFile, ...args]);
  routers.push(r);
  return r;
}

const rows = wineRows(2);
const infer = (base: string, model: string, headers: Record<string, string> = {}): Promise<Answer> => post(`${base}/wine/v2/models/${model}/infer`, v2Body(rows), headers);
const metric = (m: Map<string, number>, name: string, ...labels: string[]): number =>
  [...m].filter(([k]) => k.startsWith(`${name}{`) && labels.every((l) => k.includes(l))).reduce((sum, [, v]) => sum + v, 0);

/** `n` requests, `parallel` at a time. */
async function many<T>(n: number, parallel: number, one: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array<T>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await one(i);
      }
    }),
  );
  return out;
}

beforeAll(async () => {
  dir = await wineModelFolder('modelmux-routes-', MODELS);
  // Two versions of wine-9 in the store's layout, <id>/<v>/model.onnx, beside its default one.
  for (const v of ['1', '2']) {
    await mkdir(join(dir, 'wine-9', v), { recursive: true });
    await writeFile(join(dir, 'wine-9', v, 'model.onnx'), wineModelBytes(`wine-9@${v}`));
  }
  await writeFile(join(dir, 'wine-9', 'model.onnx'), wineModelBytes('wine-9'));
  routesFile = join(dir, 'routes.yaml');
  await writeFile(routesFile, ROUTES);
  replicas = await Promise.all([0, 1].map(() => startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '8'] })));
}, 120_000);

afterEach(async () => {
  await Promise.all(routers.splice(0).map((r) => r.stop(5000)));
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop(5000)));
  await rm(dir, { recursive: true, force: true });
});

describe('split ModelRoutes through the router', () => {
  it('holds a 90/10 canary within 5 sigma over 2,000 requests, each answered by the model it names', async () => {
    const rt = await router();
    const n = 2000;
    const answers = await many(n, 16, () => infer(rt.url, 'wine-7'));
    const byBackend = new Map<string, number>();
    for (const a of answers) {
      expect(a.status).toBe(200);
      const backend = a.headers.get('x-modelmux-backend') ?? '';
      byBackend.set(backend, (byBackend.get(backend) ?? 0) + 1);
    }
    expect([...byBackend.keys()].sort()).toEqual(['canary', 'stable']);
    // The numbers are the named backend's own: the replica ran the model the router chose.
    for (const a of answers.slice(0, 200)) expectClose(v2Outputs(a), expected(a.headers.get('x-modelmux-backend') ?? '', rows));
    const share = (byBackend.get('canary') ?? 0) / n;
    const sigma = Math.sqrt((0.1 * 0.9) / n);
    expect(Math.abs(share - 0.1)).toBeLessThan(5 * sigma);
    const m = await rt.metrics();
    expect(metric(m, 'modelmux_router_route_requests_total', 'route="wine-7"', 'backend="canary"', 'outcome="ok"')).toBe(byBackend.get('canary'));
    expect(metric(m, 'modelmux_router_route_requests_total', 'route="wine-7"', 'backend="stable"', 'outcome="ok"')).toBe(byBackend.get('stable'));
  });

  it('rewrites the model of the Ray and SageMaker forms too', async () => {
    const rt = await router();
    const forms: [string, Record<string, string>][] = [
      [`${rt.url}/wine/`, { serve_multiplexed_model_id: 'wine-7' }],
      [`${rt.url}/wine/`, { 'serve-multiplexed-model-id': 'wine-7' }],
      [`${rt.url}/wine/invocations`, { 'X-Amzn-SageMaker-Target-Model': 'wine-7' }],
    ];
    for (const [url, headers] of forms) {
      for (let i = 0; i < 10; i++) {
        const a = await post(url, v2Body(rows), headers);
        expect(a.status).toBe(200);
        const backend = a.headers.get('x-modelmux-backend') ?? '';
        expect(['stable', 'canary']).toContain(backend);
        const out = a.body.outputs === undefined ? predictions(a) : v2Outputs(a);
        expectClose(out, expected(backend, rows));
      }
    }
  });

  it('splits a model’s public name between its versions, while an explicit version is served as asked', async () => {
    const rt = await router();
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const a = i % 2 === 0 ? await infer(rt.url, 'wine-9') : await post(`${rt.url}/wine/invocations`, v2Body(rows), { 'X-Amzn-SageMaker-Target-Model': 'wine-9' });
      expect(a.status).toBe(200);
      const backend = a.headers.get('x-modelmux-backend') ?? '';
      expect(['wine-9@1', 'wine-9@2']).toContain(backend);
      expectClose(a.body.outputs === undefined ? predictions(a) : v2Outputs(a), expected(backend, rows));
      seen.add(backend);
    }
    expect(seen.size).toBe(2);
    const pinned = await post(`${rt.url}/wine/v2/models/wine-9/versions/2/infer`, v2Body(rows));
    expect(pinned.status).toBe(200);
    expect(pinned.headers.get('x-modelmux-backend')).toBeNull();
    expectClose(v2Outputs(pinned), expected('wine-9@2', rows));
  });

  it('keeps each user on one backend with a sticky header, and spreads the users over both', async () => {
    const rt = await router();
    const users = Array.from({ length: 100 }, (_, i) => `user-${i}`);
    const first = await many(users.length, 8, async (i) => (await infer(rt.url, 'sticky', { 'x-user-id': users[i] as string })).headers.get('x-modelmux-backend'));
    const again = await many(users.length * 2, 8, async (i) => (await infer(rt.url, 'sticky', { 'x-user-id': users[i % users.length] as string })).headers.get('x-modelmux-backend'));
    again.forEach((b, i) => expect([users[i % users.length], b]).toEqual([users[i % users.length], first[i % users.length]]));
    const u1 = first.filter((b) => b === 'u1').length;
    expect(u1).toBeGreaterThan(25);
    expect(u1).toBeLessThan(75);
  });

  it('mirrors to a shadow backend whose answers are counted, never returned', async () => {
    const rt = await router();
    const answers = await many(40, 4, () => infer(rt.url, 'shadowed'));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.headers.get('x-modelmux-backend')).toBe('stable');
      expectClose(v2Outputs(a), expected('stable', rows));
    }
    await eventually(async () => expect(metric(await rt.metrics(), 'modelmux_router_route_mirror_requests_total', 'route="shadowed"', 'backend="shadow"', 'outcome="ok"')).toBe(40), 20_000, 25);
    const m = await rt.metrics();
    expect(metric(m, 'modelmux_router_route_mirror_duration_seconds_count', 'backend="shadow"')).toBe(40);
    // The copies were requests of their own at a replica: one of them loaded the shadow model.
    const tables = await Promise.all(replicas.map(async (r) => (await (await fetch(`${r.url}/models`)).json()) as { loaded: string[] }));
    expect(tables.some((t) => t.loaded.includes('shadow'))).toBe(true);
  });

  it('drops mirror copies past --mirror-max-in-flight without touching the answers', async () => {
    const rt = await router(['--mirror-max-in-flight', '0']);
    const answers = await many(10, 2, () => infer(rt.url, 'shadowed'));
    for (const a of answers) expect(a.status).toBe(200);
    const m = await rt.metrics();
    expect(metric(m, 'modelmux_router_route_mirror_requests_total', 'route="shadowed"', 'outcome="dropped"')).toBe(10);
    expect(metric(m, 'modelmux_router_route_mirror_requests_total', 'route="shadowed"', 'outcome="ok"')).toBe(0);
  });

  it('answers a clear JSON error for a backend the store lacks and for a route cycle', async () => {
    const rt = await router();
    const missing = await infer(rt.url, 'gone');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: 'model_not_found' });
    expect(missing.headers.get('x-modelmux-backend')).toBe('no-such-model');
    for (const name of ['loop-a', 'loop-b']) {
      const loop = await infer(rt.url, name);
      expect(loop.status).toBe(508);
      expect(loop.body).toMatchObject({ error: 'route_cycle' });
      expect(String(loop.body.message)).toContain('refers back to itself');
    }
    // Plain models are served as before, beside the routes.
    expectClose(v2Outputs(await infer(rt.url, 'u1')), expected('u1', rows));
    expect(metric(await rt.metrics(), 'modelmux_router_route_requests_total', 'route="gone"', 'outcome="client_error"')).toBe(1);
  });
});
