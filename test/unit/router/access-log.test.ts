import { AccessLog, type AccessEntry } from '../../../router/access-log.js';

const ok: AccessEntry = {
  requestId: 'r1',
  method: 'POST',
  path: '/wine/v2/models/m1/infer',
  route: '/wine',
  model: 'm1',
  form: 'v2',
  replica: 'http://127.0.0.1:9001',
  placement: 'holder',
  waitedMs: 0,
  tries: 1,
  error: undefined,
  status: 200,
  durationMs: 1.5,
};

describe('AccessLog', () => {
  it('writes one JSON line per request with the logger fields, batching lines until the flush', () => {
    const writes: string[] = [];
    const log = new AccessLog({ component: 'router' }, (s) => void writes.push(s), 60_000);
    log.request(ok);
    log.request({ ...ok, requestId: 'r2', path: '/wine/"odd"\n', model: undefined, form: 'other', replica: undefined, placement: undefined, waitedMs: undefined, tries: undefined });
    expect(writes).toEqual([]);
    log.flush();
    expect(writes).toHaveLength(1);
    const lines = (writes[0] as string).trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toEqual({ time: expect.any(String), level: 'info', msg: 'request', component: 'router', requestId: 'r1', method: 'POST', path: '/wine/v2/models/m1/infer', route: '/wine', model: 'm1', form: 'v2', replica: 'http://127.0.0.1:9001', placement: 'holder', waitedMs: 0, tries: 1, status: 200, durationMs: 1.5 });
    expect(lines[1]).toEqual({ time: expect.any(String), level: 'info', msg: 'request', component: 'router', requestId: 'r2', method: 'POST', path: '/wine/"odd"\n', route: '/wine', form: 'other', status: 200, durationMs: 1.5 });
    expect(new Date(lines[0]?.['time'] as string).getTime()).toBeGreaterThan(0);
  });

  it('writes a failed request at once, with the lines buffered before it', () => {
    const writes: string[] = [];
    const log = new AccessLog({ component: 'router' }, (s) => void writes.push(s), 60_000);
    log.request(ok);
    log.request({ ...ok, requestId: 'r3', error: 'pool_saturated', status: 503 });
    expect(writes).toHaveLength(1);
    expect((writes[0] as string).trimEnd().split('\n').map((l) => (JSON.parse(l) as { requestId: string; error?: string }).error)).toEqual([undefined, 'pool_saturated']);
  });

  it('writes within the flush interval without being asked', async () => {
    const writes: string[] = [];
    const log = new AccessLog({ component: 'router' }, (s) => void writes.push(s), 5);
    log.request(ok);
    await new Promise((r) => setTimeout(r, 50));
    expect(writes).toHaveLength(1);
  });
});
