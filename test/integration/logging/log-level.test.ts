import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { freePort } from '../../../harness/control-plane.js';
import { startReplica, type ReplicaProcess } from '../../../harness/replica-process.js';
import { startRouter, type RouterProcess } from '../../../harness/router-process.js';
import { post, v2Body, wineRows } from '../replica/wine-fixtures.js';
import { wineModelFolder } from '../../helpers/wine-folder.js';

jest.setTimeout(60_000);

let dir: string;
let replica: ReplicaProcess;
let router: RouterProcess;

// Above level info a process writes no listening line, so both get ports chosen here.
beforeAll(async () => {
  dir = await wineModelFolder('modelmux-log-level-', ['alpha', 'beta']);
  await mkdir(join(dir, 'broken'));
  await writeFile(join(dir, 'broken', 'model.onnx'), 'not an onnx model');
  replica = await startReplica({ args: ['--model-source', pathToFileURL(dir).href, '--max-models', '1'], env: { MODELMUX_LOG_LEVEL: 'warn' }, port: await freePort() });
  router = await startRouter(['--routes', `/wine=${replica.url}`, '--log-level', 'warn'], {}, 20_000, await freePort());
});

afterAll(async () => {
  await router?.stop();
  await replica?.stop();
  await rm(dir, { recursive: true, force: true });
});

const levels = (lines: Record<string, unknown>[]): string[] => [...new Set(lines.map((l) => String(l['level'])))];

describe('processes at log level warn', () => {
  it('serve, load and evict without writing an info line, and still write what went wrong', async () => {
    // Through the router: two models in one slot load, evict and release (four info lines each at info).
    for (const id of ['alpha', 'beta', 'alpha']) expect((await post(`${router.url}/wine/v2/models/${id}/infer`, v2Body(wineRows(1)))).status).toBe(200);
    expect((await post(`${router.url}/wine/v2/models/broken/infer`, v2Body(wineRows(1)))).body.error).toBe('model_load_failed');
    expect((await post(`${router.url}/beer/v2/models/alpha/infer`, v2Body(wineRows(1)))).body.error).toBe('route_not_found');
    const metrics = await replica.metrics();
    expect(metrics.get('modelmux_replica_model_loads_total{result="success"}')).toBe(3);
    expect(metrics.get('modelmux_replica_model_evictions_total')).toBeGreaterThanOrEqual(2);
    // Info lines would be at most 50 ms late (common/log.ts).
    await sleep(300);

    expect(levels(replica.logLines())).toEqual(['warn']);
    expect(replica.logLines()).toEqual([expect.objectContaining({ event: 'load-failed', model: 'broken', error: 'model_load_failed' })]);
    // The router's access log keeps the failed requests' lines only: the load failure answered by the replica is not the router's.
    expect(levels(router.logLines())).toEqual(['warn']);
    expect(router.logLines()).toEqual([expect.objectContaining({ msg: 'request', route: 'none', error: 'route_not_found', status: 404 })]);
  });
});
