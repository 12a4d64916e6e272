import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { difference } from './gpu-check-report.js';
import { delta, parseSnapshot } from './replica-snapshot.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.

const METRICS = `# HELP modelmux_replica_model_loads_total Model loads.
# TYPE modelmux_replica_model_loads_total counter
modelmux_replica_model_loads_total{result="success"} 7
# HELP modelmux_replica_model_evictions_total Evictions.
# TYPE modelmux_replica_model_evictions_total counter
# HELP modelmux_replica_model_load_phase_seconds Load phases.
# TYPE modelmux_replica_model_load_phase_seconds histogram
modelmux_replica_model_load_phase_seconds_bucket{le="+Inf",phase="load"} 3
modelmux_replica_model_load_phase_seconds_sum{phase="load"} 0.6
modelmux_replica_model_load_phase_seconds_count{phase="load"} 3
`;

describe("the GPU check's reading of a replica", () => {
  const s = parseSnapshot(METRICS, undefined);

  it('reads a counter, and a declared counter with no sample yet as zero', () => {
    assert.equal(s.loads, 7);
    assert.equal(s.evictions, 0);
  });

  it('reports a metric the replica does not declare as absent, never as zero', () => {
    assert.equal(s.deviceUsed, undefined);
    assert.equal(s.tierLoads.store, undefined);
    assert.equal(s.smiBytes, undefined);
    assert.equal(delta(s.deviceUsed, 5), undefined);
  });

  it("reads a histogram's sum and count by phase", () => {
    assert.equal(s.phaseSeconds.load, 0.6);
    assert.equal(s.phaseCount.load, 3);
    assert.equal(s.phaseCount.warm, 0);
  });

  it('measures answers relative to the reference, and a NaN as infinitely far', () => {
    const d = difference([1, 10.01], [1, 10]);
    assert.ok(Math.abs(d.abs - 0.01) < 1e-9 && Math.abs(d.rel - 0.001) < 1e-9);
    assert.equal(difference([Number.NaN], [1]).rel, Infinity);
  });
});
