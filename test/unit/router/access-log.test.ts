import { expect } from '@jest/globals';
import type { LogLevel } from '../../../common/log.js';
import { AccessLog, type AccessEntry } from '../../../router/exchange/access-log.js';

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
  it('writes only failed requests’ lines above level info, and none at error', () => {
    const written = (level: LogLevel): string[] => {
      const lines: string[] = [];
      const log = new AccessLog({ component: 'router' }, (line) => void lines.push(line), level);
      log.request(ok);
      log.request({ ...ok, requestId: 'r2', error: 'replica_unavailable', status: 502 });
      return lines.map((l) => (JSON.parse(l) as { requestId: string }).requestId);
    };
    expect(written('info')).toEqual(['r1', 'r2']);
    expect(written('warn')).toEqual(['r2']);
    expect(written('error')).toEqual([]);
  });

  it('writes one JSON line per request with the logger fields, a failed request’s a warning written at once', () => {
    const lines: [string, boolean][] = [];
    const log = new AccessLog({ component: 'router' }, (line, urgent) => void lines.push([line, urgent]));
    log.request(ok);
    log.request({ ...ok, requestId: 'r2', path: '/wine/"odd"\n', model: undefined, form: 'other', replica: undefined, placement: undefined, waitedMs: undefined, tries: undefined });
    log.request({ ...ok, requestId: 'r3', error: 'pool_saturated', status: 503 });
    expect(lines.map(([, urgent]) => urgent)).toEqual([false, false, true]);
    const parsed = lines.map(([l]) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed[0]).toEqual({
      time: expect.any(String),
      level: 'info',
      msg: 'request',
      component: 'router',
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
      status: 200,
      durationMs: 1.5,
    });
    expect(parsed[1]).toEqual({
      time: expect.any(String),
      level: 'info',
      msg: 'request',
      component: 'router',
      requestId: 'r2',
      method: 'POST',
      path: '/wine/"odd"\n',
      route: '/wine',
      form: 'other',
      status: 200,
      durationMs: 1.5,
    });
    expect(parsed[2]).toEqual({ ...parsed[0], time: expect.any(String), level: 'warn', requestId: 'r3', error: 'pool_saturated', status: 503 });
    expect(new Date(parsed[0]?.['time'] as string).getTime()).toBeGreaterThan(0);
  });

  it('prints the time with milliseconds and the duration to a tenth of a millisecond, as JSON would print them', () => {
    const lines: string[] = [];
    const log = new AccessLog({}, (line) => void lines.push(line));
    const durations = [0, 0.04, 0.05, 1.5, 2, 12.34, 99.96, 1234.56, 60_000.04];
    const before = Date.now();
    for (const durationMs of durations) log.request({ ...ok, durationMs });
    const after = Date.now();
    const parsed = lines.map((l) => JSON.parse(l) as { time: string; durationMs: number });
    expect(lines.map((l) => l.slice(l.lastIndexOf(':') + 1, -1))).toEqual(durations.map((d) => JSON.stringify(Math.round(d * 10) / 10)));
    for (const p of parsed) {
      expect(p.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      const t = new Date(p.time).getTime();
      expect(t).toBeGreaterThanOrEqual(before);
      expect(t).toBeLessThanOrEqual(after);
    }
  });
});
