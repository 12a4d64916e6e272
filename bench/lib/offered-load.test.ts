import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultOfferedRate, worstP99Ms } from './offered-load.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.

describe("bench:grpc's open-loop windows", () => {
  it('offer a quarter of the lower closed-loop rate, each protocol over all its windows', () => {
    const closed = [
      { protocol: 'http', ok: 3000, seconds: 10 },
      { protocol: 'grpc', ok: 2000, seconds: 10 },
      { protocol: 'grpc', ok: 2400, seconds: 10 },
      { protocol: 'http', ok: 2800, seconds: 10 },
    ];
    // gRPC's 220 req/s is the lower (HTTP's 290), whichever single window is lowest.
    assert.equal(defaultOfferedRate(closed), 55);
    assert.equal(defaultOfferedRate(closed, 1), 220);
  });

  it('offer at least one request a second, and nothing when a protocol answered nothing', () => {
    assert.equal(
      defaultOfferedRate([
        { protocol: 'http', ok: 1, seconds: 10 },
        { protocol: 'grpc', ok: 1, seconds: 10 },
      ]),
      1,
    );
    assert.equal(
      defaultOfferedRate([
        { protocol: 'http', ok: 3000, seconds: 10 },
        { protocol: 'grpc', ok: 0, seconds: 10 },
      ]),
      0,
    );
    assert.equal(defaultOfferedRate([]), 0);
  });

  it("judge each protocol by its worst window's p99", () => {
    const windows = [
      { protocol: 'grpc', latency: { p99Ms: 3 } },
      { protocol: 'http', latency: { p99Ms: 9 } },
      { protocol: 'grpc', latency: { p99Ms: 5 } },
    ];
    assert.equal(worstP99Ms(windows, 'grpc'), 5);
    assert.equal(worstP99Ms(windows, 'http'), 9);
  });
});
