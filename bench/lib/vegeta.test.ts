import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseReport, targetsText } from './vegeta.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.

describe("bench:grpc's vegeta client", () => {
  it('writes each target as a request line, its headers and its body file, a blank line between targets', () => {
    const text = targetsText([
      { url: 'http://127.0.0.1:1/wine/v2/models/a/infer', headers: { 'Content-Type': 'application/json' }, bodyFile: '/t/a.json' },
      { url: 'http://127.0.0.1:2/inference.GRPCInferenceService/ModelInfer', headers: { 'Content-Type': 'application/grpc', Te: 'trailers' }, bodyFile: '/t/b.bin' },
    ]);
    assert.equal(
      text,
      'POST http://127.0.0.1:1/wine/v2/models/a/infer\nContent-Type: application/json\n@/t/a.json\n\n' +
        'POST http://127.0.0.1:2/inference.GRPCInferenceService/ModelInfer\nContent-Type: application/grpc\nTe: trailers\n@/t/b.bin\n',
    );
  });

  it('reads a JSON report, nanoseconds as milliseconds, no errors as an empty list', () => {
    const s = parseReport(
      JSON.stringify({
        latencies: { total: 9e9, mean: 1_500_000, '50th': 1_000_000, '90th': 2_000_000, '95th': 2_500_000, '99th': 4_250_000, max: 30_000_000, min: 400_000 },
        bytes_in: { total: 1, mean: 1 },
        bytes_out: { total: 1, mean: 1 },
        earliest: '2026-12-06T06:00:00Z',
        latest: '2026-12-06T06:00:08Z',
        end: '2026-12-06T06:00:08Z',
        duration: 8e9,
        wait: 1e6,
        requests: 8000,
        rate: 1000.1,
        throughput: 999.9,
        success: 1,
        status_codes: { '200': 8000 },
        errors: null,
      }),
    );
    assert.deepEqual(s.latency, { p50Ms: 1, p90Ms: 2, p99Ms: 4.25, maxMs: 30, meanMs: 1.5 });
    assert.equal(s.requests, 8000);
    assert.deepEqual(s.statusCodes, { '200': 8000 });
    assert.deepEqual(s.errors, []);
  });

  it('refuses a report without latencies', () => {
    assert.throws(() => parseReport(JSON.stringify({ requests: 1 })));
  });
});
