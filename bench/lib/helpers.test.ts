import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../common/config.js';
import { busyReason } from './busy-machine.js';
import { commaList } from './comma-list.js';
import { globalLruMisses } from './global-lru.js';
import { machineLine, type MachineInfo } from './machine.js';
import { nginxConfig } from './nginx.js';
import { sumMetric } from './prom-text.js';
import { mean, median, medianBy, percentile, rotated, summarize } from './stats.js';
import { idSampler, modelIds } from './traffic.js';

// Not a test tier: `npm run bench:check` runs the bench self-checks (node --test), `npm test` does not.

const close = (actual: number, expected: number, digits = 2): void => assert.ok(Math.abs(actual - expected) < 10 ** -digits / 2, `${actual} is not ${expected}`);

describe('the ideal global LRU floor', () => {
  it('loads each model once while every model fits in the slots', () => {
    assert.deepEqual(globalLruMisses(['a', 'b', 'a', 'c', 'b', 'a'], 3), { requests: 6, misses: 3 });
  });

  it('evicts the least recently used model when the slots are full', () => {
    // a b a c: b is the oldest when c arrives; b then misses, a still hits.
    assert.deepEqual(globalLruMisses(['a', 'b', 'a', 'c', 'a', 'b'], 2), { requests: 6, misses: 4 });
  });

  it('does not count the warm-up requests but keeps what they loaded', () => {
    assert.deepEqual(globalLruMisses(['a', 'b', 'a', 'b', 'c'], 2, 2), { requests: 3, misses: 1 });
  });
});

describe('reading counters from Prometheus text', () => {
  const text = [
    '# HELP modelmux_replica_model_loads_total Model loads.',
    '# TYPE modelmux_replica_model_loads_total counter',
    'modelmux_replica_model_loads_total{result="success"} 7',
    'modelmux_replica_model_loads_total{result="failure"} 2',
    'modelmux_replica_model_loads_total_extra 100',
    'modelmux_replica_models_loaded 3',
  ].join('\n');

  it('sums the samples whose labels match', () => {
    assert.equal(sumMetric(text, 'modelmux_replica_model_loads_total', { result: 'success' }), 7);
    assert.equal(sumMetric(text, 'modelmux_replica_model_loads_total'), 9);
  });

  it('does not take a longer metric name for the one asked', () => {
    assert.equal(sumMetric(text, 'modelmux_replica_models_loaded'), 3);
  });
});

describe('latency summaries', () => {
  it('takes nearest-rank percentiles', () => {
    const samples = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(samples, 50), 50);
    assert.equal(percentile(samples, 99), 99);
    assert.equal(summarize([3, 1, 2]).p50Ms, 2);
    assert.ok(Number.isNaN(summarize([]).p99Ms));
  });

  it('takes the median of odd and even counts in any order, and the mean', () => {
    assert.equal(median([3, 1, 2]), 2);
    close(median([0.9, 1.1, 0.8, 1.0]), 0.95);
    assert.ok(Number.isNaN(median([])));
    assert.equal(mean([3, 1, 2, 10]), 4);
    assert.ok(Number.isNaN(mean([])));
  });
});

describe('the request mixes', () => {
  it('draws the same model sequence for the same pattern and seed', () => {
    const ids = modelIds(50);
    const a = idSampler('zipf', ids, 7);
    const b = idSampler('zipf', ids, 7);
    const seqA = Array.from({ length: 200 }, () => a());
    assert.deepEqual(
      Array.from({ length: 200 }, () => b()),
      seqA,
    );
    assert.ok(new Set(seqA).size > 5);
  });

  it('sends about 80% of one-hot traffic to one model (10000 draws, ±3%)', () => {
    const next = idSampler('one-hot', modelIds(100), 1);
    const counts = new Map<string, number>();
    for (let i = 0; i < 10_000; i++) {
      const id = next();
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    const top = Math.max(...counts.values()) / 10_000;
    assert.ok(top > 0.77 && top < 0.83, `top model got ${top}`);
  });
});

describe('the nginx configuration', () => {
  it('keeps the serve_multiplexed_model_id header, which nginx drops by default', () => {
    assert.ok(nginxConfig('/tmp/x', 8080, '/wine', '127.0.0.1:9000', 1).includes('underscores_in_headers on;'));
  });

  it('logs nothing and adds no header when plain, like the reference it is', () => {
    const conf = nginxConfig('/tmp/x', 8080, '/wine', '127.0.0.1:9000', 1);
    assert.ok(conf.includes('access_log off;'));
    assert.ok(!conf.includes('X-Request-Id'));
  });

  it("does the router's per-request work when asked: a batched JSON log line, a request id both ways, X-Forwarded-For", () => {
    const conf = nginxConfig('/tmp/x', 8080, '/wine', '127.0.0.1:9000', 1, true);
    assert.ok(!conf.includes('access_log off;'));
    assert.ok(conf.includes('access_log /tmp/x/access.log modelmux buffer=64k flush=50ms;'));
    assert.match(conf, /log_format modelmux escape=json '\{"time":"\$time_iso8601".*"route":"\/wine".*"status":\$status.*\}';/);
    assert.ok(conf.includes('proxy_set_header X-Request-Id $request_id;'));
    assert.ok(conf.includes('add_header X-Request-Id $request_id always;'));
    assert.ok(conf.includes('proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;'));
  });
});

describe('medianBy', () => {
  it('picks the item whose key is the median, the lower middle one of an even count', () => {
    const rounds = [
      { round: 0, v: 30 },
      { round: 1, v: 10 },
      { round: 2, v: 20 },
    ];
    assert.deepEqual(
      medianBy(rounds, (r) => r.v),
      { round: 2, v: 20 },
    );
    assert.deepEqual(
      medianBy(rounds.slice(0, 2), (r) => r.v),
      { round: 1, v: 10 },
    );
    assert.deepEqual(
      medianBy([{ v: 5 }], (r) => r.v),
      { v: 5 },
    );
    assert.equal(
      medianBy([], (r: { v: number }) => r.v),
      undefined,
    );
  });
});

describe('rotated', () => {
  it('starts each round one item later, so every item takes every place once', () => {
    const items = ['uniform', 'one-hot', 'zipf'];
    assert.deepEqual(
      [0, 1, 2, 3].map((r) => rotated(items, r)),
      [
        ['uniform', 'one-hot', 'zipf'],
        ['one-hot', 'zipf', 'uniform'],
        ['zipf', 'uniform', 'one-hot'],
        ['uniform', 'one-hot', 'zipf'],
      ],
    );
    assert.deepEqual(items, ['uniform', 'one-hot', 'zipf']);
    assert.deepEqual(rotated([], 2), []);
  });
});

describe('the Machine line', () => {
  const machine: MachineInfo = {
    date: '2026-12-03T07:46:54.540Z',
    nproc: 2,
    memoryGiB: 23.5,
    cpuModel: 'AMD EPYC',
    node: 'v20.20.2',
    kernel: '6.18',
    gitCommit: '8c1b4d7',
    uncommitted: [],
    loadAverage1m: 1,
  };

  it('names the commit alone when the run measured exactly it', () => {
    assert.ok(machineLine(machine).includes('· commit 8c1b4d7 · load average 1 at start'));
  });

  it('names the changed files when the run measured more than the commit, the first five of them', () => {
    const changed = ['router/a.ts', 'router/b.ts', 'replica/c.ts', 'd.ts', 'e.ts', 'f.ts', 'g.ts'];
    assert.ok(machineLine({ ...machine, uncommitted: changed.slice(0, 1) }).includes('commit 8c1b4d7 plus uncommitted changes to router/a.ts ·'));
    assert.ok(machineLine({ ...machine, uncommitted: changed }).includes('plus uncommitted changes to router/a.ts, router/b.ts, replica/c.ts, d.ts, e.ts and 2 more ·'));
  });

  it('says so when git could not tell', () => {
    assert.ok(machineLine({ ...machine, uncommitted: undefined }).includes('commit 8c1b4d7 (working tree unknown)'));
  });
});

describe('comma lists of known names (--patterns, --systems)', () => {
  const known = ['uniform', 'one-hot', 'zipf'] as const;

  it('keeps the order given and ignores spaces and empty items', () => {
    assert.deepEqual(commaList('bench x', ' zipf, uniform ,,', known, 'pattern'), ['zipf', 'uniform']);
  });

  it('refuses an unknown name or a repeat with the command, the name and what is known', () => {
    assert.throws(() => commaList('bench x', 'uniform,bogus', known, 'pattern'), ConfigError);
    const message = (raw: string): string => {
      try {
        commaList('bench x', raw, known, 'pattern');
      } catch (err) {
        return (err as Error).message;
      }
      return 'nothing thrown';
    };
    assert.match(message('uniform,bogus'), /^modelmux bench x: .*\n.*unknown pattern: bogus \(known: uniform, one-hot, zipf\)/);
    assert.match(message('zipf,uniform,zipf'), /pattern listed more than once: zipf/);
  });
});

describe('the busy-machine check of a latency benchmark', () => {
  it('lets a run start at or below the load per core it allows, and refuses one above, saying both', () => {
    assert.equal(busyReason(0.5, 2, 0.25), undefined);
    assert.equal(busyReason(0, 16, 0.25), undefined);
    assert.match(busyReason(0.6, 2, 0.25) ?? '', /load average is 0\.60 on 2 cores, above --max-load 0\.25 per core \(0\.50\)/);
  });

  it('does not check with a limit of 0', () => {
    assert.equal(busyReason(17.6, 2, 0), undefined);
  });
});
