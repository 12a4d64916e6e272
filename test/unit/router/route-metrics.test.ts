import { readFile } from 'node:fs/promises';
import { RouterMetrics } from '../../../router/metrics.js';
import { ModelRouteMetrics, routeOutcome } from '../../../router/routes/route-metrics.js';

describe('the metrics of split routes', () => {
  it('count by route, backend and outcome on the router registry, once per registry', async () => {
    const metrics = new RouterMetrics();
    const m = ModelRouteMetrics.for(metrics);
    expect(ModelRouteMetrics.for(metrics)).toBe(m);
    m.answered('wine-7', 'wine-7@2', 200);
    m.answered('wine-7', 'wine-7@2', 404);
    m.answered('wine-7', 'wine-7@1', 503);
    m.mirrorEnded('wine-7', 'shadow', 'dropped');
    m.mirrorEnded('wine-7', 'shadow', 'ok', 0.02);
    const text = await metrics.registry.metrics();
    expect(text).toContain('modelmux_router_route_requests_total{route="wine-7",backend="wine-7@2",outcome="ok"} 1');
    expect(text).toContain('modelmux_router_route_requests_total{route="wine-7",backend="wine-7@2",outcome="client_error"} 1');
    expect(text).toContain('modelmux_router_route_requests_total{route="wine-7",backend="wine-7@1",outcome="error"} 1');
    expect(text).toContain('modelmux_router_route_mirror_requests_total{route="wine-7",backend="shadow",outcome="dropped"} 1');
    expect(text).toContain('modelmux_router_route_mirror_duration_seconds_count{route="wine-7",backend="shadow"} 1');
  });

  it('maps statuses to outcomes', () => {
    expect([200, 302, 400, 499, 500, 508].map(routeOutcome)).toEqual(['ok', 'ok', 'client_error', 'client_error', 'error', 'error']);
  });

  it('are each documented in docs/metrics.md', async () => {
    const metrics = new RouterMetrics();
    ModelRouteMetrics.for(metrics);
    const page = await readFile('docs/metrics.md', 'utf8');
    const names = (await metrics.registry.getMetricsAsJSON()).map((x) => x.name).filter((n) => n.startsWith('modelmux_router_route_'));
    expect(names).toHaveLength(3);
    expect(names.filter((n) => !page.includes(`\`${n}\``))).toEqual([]);
  });
});
