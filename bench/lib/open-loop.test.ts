import assert from 'node:assert/strict';
import { test } from 'node:test';
import { seededRandom } from '../simulator/rng.js';
import { lateBudget, poissonArrivals, rateLadder, sustainableRate, sustained } from './open-loop.js';
import { medianCi } from './stats.js';

// Not a test tier: run with `npx tsc -p tsconfig.json && node --test dist/bench/lib/open-loop.test.js`.

test('Poisson arrivals keep the rate, stay in the window, and are ordered', () => {
  const arrivals = poissonArrivals(200, 60_000, seededRandom(7));
  // 12,000 expected; a Poisson count's standard deviation is about 110.
  assert.ok(Math.abs(arrivals.length - 12_000) < 500, `got ${arrivals.length}`);
  assert.ok(arrivals.every((t, i) => t >= 0 && t < 60_000 && (i === 0 || t >= (arrivals[i - 1] as number))));
  const gaps = arrivals.slice(1).map((t, i) => t - (arrivals[i] as number));
  const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
  const variance = gaps.reduce((a, b) => a + (b - mean) ** 2, 0) / gaps.length;
  // Exponential gaps: the standard deviation equals the mean (5 ms), unlike a fixed pace (0).
  assert.ok(Math.abs(mean - 5) < 0.25, `mean gap ${mean}`);
  assert.ok(Math.abs(Math.sqrt(variance) - 5) < 0.4, `gap sd ${Math.sqrt(variance)}`);
});

test('the schedule depends only on the seed', () => {
  assert.deepEqual(poissonArrivals(50, 2000, seededRandom(3)), poissonArrivals(50, 2000, seededRandom(3)));
  assert.deepEqual(poissonArrivals(0, 2000, seededRandom(3)), []);
});

test('the ladder multiplies up to the maximum', () => {
  assert.deepEqual(rateLadder(25, 2, 400), [25, 50, 100, 200, 400]);
  assert.deepEqual(rateLadder(20, Math.SQRT2, 80), [20, 28, 40, 57, 80]);
  assert.throws(() => rateLadder(10, 1, 100));
});

test('a step is sustained only without errors and with p99 within the limit', () => {
  assert.equal(sustained({ requests: 100, ok: 100, p99Ms: 250 }, 250), true);
  assert.equal(sustained({ requests: 100, ok: 99, p99Ms: 10 }, 250), false);
  assert.equal(sustained({ requests: 100, ok: 100, p99Ms: 251 }, 250), false);
  assert.equal(sustained({ requests: 0, ok: 0, p99Ms: Number.NaN }, 250), false);
  assert.equal(lateBudget(1000), 10);
});

test('the sustainable rate is the last sustained step before the first failure', () => {
  const steps = [25, 50, 100, 200].map((rateRps, i) => ({ rateRps, sustained: i < 2 }));
  assert.equal(sustainableRate(steps), 50);
  // A lucky step after a failure does not count: the step-up stops at the first failure.
  assert.equal(
    sustainableRate([
      { rateRps: 25, sustained: false },
      { rateRps: 50, sustained: true },
    ]),
    0,
  );
});

test('the median interval widens to [min, max] when few rounds cannot reach 95%', () => {
  const five = medianCi([5, 1, 4, 2, 3]);
  assert.deepEqual([five.median, five.low, five.high], [3, 1, 5]);
  assert.ok(Math.abs(five.coverage - 0.9375) < 1e-9);
  // Twenty samples: [x(6), x(15)] covers 95.9%, [x(7), x(14)] only 88.5%.
  const twenty = medianCi(Array.from({ length: 20 }, (_, i) => i + 1));
  assert.deepEqual([twenty.low, twenty.high], [6, 15]);
  assert.ok(twenty.coverage >= 0.95);
});
