import { describe, expect, it } from '@jest/globals';
import { Counter, Histogram, Registry } from 'prom-client';
import { BoundCounter, BoundHistogram } from '../../common/bound-metrics.js';

const BUCKETS = [0.005, 0.05, 0.25, 1];
const SAMPLES = [0, 0.005, 0.0051, 0.05, 0.3, 1, 7, 0.2, 0.001];

describe('bound metrics', () => {
  it('print the same exposition text as prom-client for the same calls', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const oc = new BoundCounter('t_requests_total', 'Requests.', ['route', 'code'], ours);
    const tc = new Counter({ name: 't_requests_total', help: 'Requests.', labelNames: ['route', 'code'], registers: [theirs] });
    const oh = new BoundHistogram('t_duration_seconds', 'Time "taken".', ['route'], BUCKETS, ours);
    const th = new Histogram({ name: 't_duration_seconds', help: 'Time "taken".', labelNames: ['route'], buckets: BUCKETS, registers: [theirs] });
    for (const route of ['/wine', '/a"b\\c']) {
      const c = oc.labels({ code: '2xx', route });
      const h = oh.labels({ route });
      for (const v of SAMPLES) {
        c.inc();
        tc.labels({ route, code: '2xx' }).inc();
        h.observe(v);
        th.labels({ route }).observe(v);
      }
    }
    oc.labels({ route: '/wine', code: '5xx' }).inc(3);
    tc.labels({ route: '/wine', code: '5xx' }).inc(3);
    // A child asked for but never used prints nothing, like prom-client's.
    oc.labels({ route: '/wine', code: '4xx' });
    oh.labels({ route: '/idle' });
    const text = await ours.metrics();
    expect(text).toBe(await theirs.metrics());
    expect(text).toContain('t_duration_seconds_bucket{le="0.05",route="/wine"} 5');
    expect(text).toContain('t_duration_seconds_bucket{le="+Inf",route="/wine"} 9');
    expect(text).not.toContain('4xx');
  });

  it('hands out one child per label set and refuses wrong label names', () => {
    const r = new Registry();
    const c = new BoundCounter('t_total', 'T.', ['route', 'kind'], r);
    expect(c.labels({ route: '/a', kind: 'x' })).toBe(c.labels({ kind: 'x', route: '/a' }));
    expect(c.labels({ route: '/a', kind: 'x' })).not.toBe(c.labels({ route: '/a', kind: 'y' }));
    expect(() => c.labels({ route: '/a' })).toThrow(/takes the labels route, kind/);
    expect(() => c.labels({ route: '/a', kind: 'x', extra: 'z' })).toThrow(TypeError);
    expect(() => new BoundCounter('t_total', 'T.', ['route'], r)).toThrow(/already been registered/);
  });

  it('drops a value that is not a finite number instead of throwing, and sorts its buckets', async () => {
    const r = new Registry();
    const m = new BoundHistogram('t_seconds', 'T.', ['route'], [1, 0.1], r);
    const h = m.labels({ route: '/a' });
    h.observe(Number.NaN);
    h.observe(Number.POSITIVE_INFINITY);
    h.observe(0.05);
    expect(h.count).toBe(1);
    expect(h.sum).toBe(0.05);
    expect(await r.metrics()).toContain('t_seconds_bucket{le="0.1",route="/a"} 1\nt_seconds_bucket{le="1",route="/a"} 1\n');
  });
});
