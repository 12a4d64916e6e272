import { readFile } from 'node:fs/promises';
import type { Registry } from 'prom-client';
import { createOperatorMetrics } from '../../operator/metrics.js';
import { createReplicaMetrics } from '../../replica/metrics.js';
import { RouterMetrics } from '../../router/metrics.js';

async function metricNames(registry: Registry): Promise<string[]> {
  return (await registry.getMetricsAsJSON()).map((m) => m.name);
}

describe('the documentation', () => {
  it('lists every modelmux metric of the replica, the router and the operator in docs/metrics.md', async () => {
    const page = await readFile('docs/metrics.md', 'utf8');
    // Node's default process metrics of each program are covered by one paragraph, not listed.
    const own = (n: string): boolean => !/^modelmux_(replica|router|operator)_(process|nodejs)_/.test(n);
    const names = [...(await metricNames(createReplicaMetrics().registry)), ...(await metricNames(new RouterMetrics().registry)), ...(await metricNames(createOperatorMetrics().registry))].filter(own);
    expect(names.length).toBeGreaterThan(20);
    for (const program of ['replica', 'router', 'operator']) expect(page).toContain(`\`modelmux_${program}_nodejs_gc_duration_seconds\``);
    expect(names.filter((n) => !page.includes(`\`${n}\``))).toEqual([]);
  });
});
