import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultOfferedRate, inFlightCap, MIN_IN_FLIGHT, offeredLoadWindow, worstP99Ms } from './offered-load.js';

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

  it('let a second of arrivals be in flight, never fewer than the floor', () => {
    assert.equal(inFlightCap(1500), 1500);
    assert.equal(inFlightCap(100.2), 101);
    assert.equal(inFlightCap(10), MIN_IN_FLIGHT);
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

  it('keep sending through a stall, charge it to the requests scheduled behind it, and drop arrivals past the cap', async () => {
    // A server that answers nothing for the first 300 ms, then at once: a closed loop would have sent
    // nothing meanwhile; here every arrival of the stall waits, and its latency runs from its schedule.
    const start = performance.now();
    const stalled = async (): Promise<number> => {
      const left = 300 - (performance.now() - start);
      if (left > 0) await new Promise((r) => setTimeout(r, left));
      return 1;
    };
    const w = await offeredLoadWindow({ sends: [stalled], ids: ['a', 'b'], rateRps: 200, durationMs: 1000, seed: 51, cap: 20 });
    assert.equal(w.requests, w.ok + w.errors + w.dropped);
    assert.equal(w.errors, 0);
    // About 60 arrivals in the stall, 20 in flight at most: the rest are dropped and counted.
    assert.ok(w.dropped >= 20, `dropped ${w.dropped}`);
    assert.ok(w.latency.maxMs >= 200, `max ${w.latency.maxMs}`);
    assert.ok(w.latency.p50Ms < 50, `p50 ${w.latency.p50Ms}`);
  });

  it('count a failed request as an error with its message', async () => {
    const failing = (): Promise<number> => Promise.reject(new Error('gRPC status 14'));
    const w = await offeredLoadWindow({ sends: [failing], ids: ['a'], rateRps: 100, durationMs: 200, seed: 1, cap: 64 });
    assert.ok(w.requests > 0);
    assert.equal(w.errors, w.requests);
    assert.equal(w.firstFailure, 'gRPC status 14');
    assert.ok(Number.isNaN(w.latency.p99Ms));
  });
});
