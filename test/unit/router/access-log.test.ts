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
  it('writes one JSON line per request with the logger fields, urgent only for a failed request', () => {
    const lines: [string, boolean][] = [];
    const log = new AccessLog({ component: 'router' }, (line, urgent) => void lines.push([line, urgent]));
    log.request(ok);
    log.request({ ...ok, requestId: 'r2', path: '/wine/"odd"\n', model: undefined, form: 'other', replica: undefined, placement: undefined, waitedMs: undefined, tries: undefined });
    log.request({ ...ok, requestId: 'r3', error: 'pool_saturated', status: 503 });
    expect(lines.map(([, urgent]) => urgent)).toEqual([false, false, true]);
    const parsed = lines.map(([l]) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed[0]).toEqual({ time: expect.any(String), level: 'info', msg: 'request', component: 'router', requestId: 'r1', method: 'POST', path: '/wine/v2/models/m1/infer', route: '/wine', model: 'm1', form: 'v2', replica: 'http://127.0.0.1:9001', placement: 'holder', waitedMs: 0, tries: 1, status: 200, durationMs: 1.5 });
    expect(parsed[1]).toEqual({ time: expect.any(String), level: 'info', msg: 'request', component: 'router', requestId: 'r2', method: 'POST', path: '/wine/"odd"\n', route: '/wine', form: 'other', status: 200, durationMs: 1.5 });
    expect(parsed[2]).toMatchObject({ requestId: 'r3', error: 'pool_saturated', status: 503 });
    expect(new Date(parsed[0]?.['time'] as string).getTime()).toBeGreaterThan(0);
  });
});
