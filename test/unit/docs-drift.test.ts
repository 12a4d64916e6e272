import { readFile } from 'node:fs/promises';
import type { Registry } from 'prom-client';
import { ERROR_CATALOGUE } from '../../common/errors.js';
import { createOperatorMetrics } from '../../operator/metrics.js';
import { createReplicaMetrics } from '../../replica/metrics.js';
import { RouterMetrics } from '../../router/metrics.js';

async function metricNames(registry: Registry): Promise<string[]> {
  return (await registry.getMetricsAsJSON()).map((m) => m.name);
}

describe('the documentation', () => {
  it('lists every modelmux metric of the replica, the router and the operator in docs/metrics.md', async () => {
    const page = await readFile('docs/metrics.md', 'utf8');
    const names = [
      ...(await metricNames(createReplicaMetrics().registry)),
      ...(await metricNames(new RouterMetrics().registry)),
      // The operator's default process metrics are covered by one sentence, not listed.
      ...(await metricNames(createOperatorMetrics().registry)).filter((n) => !/^modelmux_operator_(process|nodejs)_/.test(n)),
    ];
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((n) => !page.includes(`\`${n}\``))).toEqual([]);
  });

  it('gives every error code a row in the troubleshooting table', async () => {
    const page = await readFile('docs/troubleshooting.md', 'utf8');
    const missing = Object.entries(ERROR_CATALOGUE).filter(([code, e]) => !page.includes(`| \`${code}\` | ${e.status} |`));
    expect(missing.map(([code]) => code)).toEqual([]);
  });
});
